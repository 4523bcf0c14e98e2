// A viewer of a VNC server for bench/screens.ts: RFB 3.8 with no password (what the machine's x11vnc offers),
// asking for the encodings noVNC asks for first (Tight at noVNC's default quality, then ZRLE, CopyRect, Raw)
// and for the next update as soon as one has arrived, as noVNC does. It decodes nothing: it reads each
// update's rectangles only far enough to know where the next message starts, and counts them.

/** Where the bytes come from and go to: a WebSocket to the service, or an exec relay of one's own. */
export interface Wire {
  send(bytes: Buffer): void;
  close(): void;
}

export interface Viewer {
  /** Updates (with at least one rectangle) and their bytes, since the viewer connected or last reset. */
  readonly frames: number;
  readonly bytes: number;
  /** Why it stopped reading (the connection broke, or the server said something it does not read); null while it reads. */
  readonly error: Error | null;
  reset(): void;
  close(): void;
}

const ENCODINGS = { raw: 0, copyRect: 1, tight: 7, zrle: 16, quality6: -32 + 6, compress2: -256 + 2 };

/** Bytes as they arrive, read by whole fields or skipped without being kept. */
class Incoming {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private wake: (() => void) | null = null;
  private failure: Error | null = null;
  received = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    this.received += chunk.length;
    this.wake?.();
  }

  fail(error: Error): void {
    this.failure = error;
    this.wake?.();
  }

  private async some(): Promise<void> {
    while (this.buffered === 0) {
      if (this.failure) throw this.failure;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = null;
    }
  }

  async read(length: number): Promise<Buffer> {
    while (this.buffered < length) {
      if (this.failure) throw this.failure;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = null;
    }
    const whole = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.chunks = whole.length > length ? [whole.subarray(length)] : [];
    this.buffered -= length;
    return whole.subarray(0, length);
  }

  async skip(length: number): Promise<void> {
    while (length > 0) {
      await this.some();
      const first = this.chunks[0]!;
      const taken = Math.min(length, first.length);
      if (taken === first.length) this.chunks.shift();
      else this.chunks[0] = first.subarray(taken);
      this.buffered -= taken;
      length -= taken;
    }
  }

  /** Tight's compact length: 7 bits a byte, up to three bytes. */
  async compactLength(): Promise<number> {
    let length = 0;
    for (let shift = 0; shift < 21; shift += 7) {
      const byte = (await this.read(1))[0]!;
      length |= (byte & 0x7f) << shift;
      if (byte < 0x80 || shift === 14) break;
    }
    return length;
  }
}

function u16s(...values: number[]): Buffer {
  const bytes = Buffer.alloc(values.length * 2);
  values.forEach((value, i) => bytes.writeUInt16BE(value, i * 2));
  return bytes;
}

const updateRequest = (incremental: boolean, width: number, height: number) => Buffer.concat([Buffer.from([3, incremental ? 1 : 0]), u16s(0, 0, width, height)]);

/** Starts a viewer on a wire: call `deliver` with every chunk the server sends, `fail` when the wire breaks. */
export function rfbViewer(wire: Wire): Viewer & { deliver(chunk: Buffer): void; fail(error: Error): void } {
  const incoming = new Incoming();
  let frames = 0;
  let bytesAtReset = 0;
  let closed = false;

  async function rectangle(width: number, height: number, encoding: number): Promise<void> {
    if (encoding === ENCODINGS.raw) return incoming.skip(width * height * 4);
    if (encoding === ENCODINGS.copyRect) return incoming.skip(4);
    if (encoding === ENCODINGS.zrle) return incoming.skip((await incoming.read(4)).readUInt32BE(0));
    if (encoding !== ENCODINGS.tight) throw new Error(`the server sent a rectangle in encoding ${encoding}, not asked for`);
    // Tight, with 32-bit pixels of depth 24: its pixels are 3 bytes.
    const control = (await incoming.read(1))[0]! >> 4;
    if (control === 0x8) return incoming.skip(3); // fill
    if (control === 0x9) return incoming.skip(await incoming.compactLength()); // JPEG
    if (control > 0x9) throw new Error(`Tight compression control ${control.toString(16)}`);
    let size = width * height * 3;
    if (control & 0x4) {
      const filter = (await incoming.read(1))[0];
      if (filter === 1) {
        const colours = (await incoming.read(1))[0]! + 1;
        await incoming.skip(colours * 3);
        size = colours === 2 ? Math.ceil(width / 8) * height : width * height;
      } else if (filter !== 0 && filter !== 2) throw new Error(`Tight filter ${filter}`);
    }
    return incoming.skip(size < 12 ? size : await incoming.compactLength());
  }

  async function speak(): Promise<void> {
    const version = (await incoming.read(12)).toString('latin1');
    if (!version.startsWith('RFB 003.')) throw new Error(`not an RFB server: ${JSON.stringify(version)}`);
    wire.send(Buffer.from('RFB 003.008\n', 'latin1'));
    const types = await incoming.read((await incoming.read(1))[0]!);
    if (!types.includes(1)) throw new Error(`the server asks for a password (security types ${[...types].join(', ')})`);
    wire.send(Buffer.from([1]));
    if ((await incoming.read(4)).readUInt32BE(0) !== 0) throw new Error('the server refused the connection');
    wire.send(Buffer.from([1])); // shared
    const init = await incoming.read(24);
    const [width, height] = [init.readUInt16BE(0), init.readUInt16BE(2)];
    await incoming.skip(init.readUInt32BE(20)); // the desktop's name
    // noVNC's pixel format: 32 bits, depth 24, true colour, little-endian shifts 0/8/16.
    wire.send(Buffer.concat([Buffer.from([0, 0, 0, 0, 32, 24, 0, 1]), u16s(255, 255, 255), Buffer.from([0, 8, 16, 0, 0, 0])]));
    const encodings = [ENCODINGS.copyRect, ENCODINGS.tight, ENCODINGS.zrle, ENCODINGS.raw, ENCODINGS.quality6, ENCODINGS.compress2];
    const setEncodings = Buffer.alloc(4 + encodings.length * 4);
    setEncodings.writeUInt8(2, 0);
    setEncodings.writeUInt16BE(encodings.length, 2);
    encodings.forEach((encoding, i) => setEncodings.writeInt32BE(encoding, 4 + i * 4));
    wire.send(setEncodings);
    wire.send(updateRequest(false, width, height));
    for (;;) {
      const type = (await incoming.read(1))[0];
      if (type === 0) {
        const count = (await incoming.read(3)).readUInt16BE(1);
        for (let i = 0; i < count; i++) {
          const header = await incoming.read(12);
          await rectangle(header.readUInt16BE(4), header.readUInt16BE(6), header.readInt32BE(8));
        }
        if (count > 0) frames++;
        wire.send(updateRequest(true, width, height));
      } else if (type === 1) {
        await incoming.skip((await incoming.read(5)).readUInt16BE(3) * 6); // colour map entries
      } else if (type === 3) {
        await incoming.skip((await incoming.read(7)).readUInt32BE(3)); // cut text
      } else if (type !== 2) {
        throw new Error(`server message type ${type}`);
      }
    }
  }

  let error: Error | null = null;
  speak().catch((failure: Error) => {
    if (!closed) error = failure;
  });
  return {
    get frames() {
      return frames;
    },
    get bytes() {
      return incoming.received - bytesAtReset;
    },
    get error() {
      return error;
    },
    reset() {
      frames = 0;
      bytesAtReset = incoming.received;
    },
    close() {
      closed = true;
      incoming.fail(new Error('closed'));
      wire.close();
    },
    deliver: (chunk) => incoming.push(chunk),
    fail: (error) => incoming.fail(error),
  };
}
