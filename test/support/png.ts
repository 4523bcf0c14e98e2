import { inflateSync } from 'node:zlib';

/** A decoded picture: `rgb(x, y)` as `#rrggbb`. */
export interface Picture {
  width: number;
  height: number;
  rgb(x: number, y: number): string;
}

/**
 * Decodes a non-interlaced 8-bit RGB or RGBA PNG (what scrot writes), for
 * tests that look at what a screen shows.
 */
export function decodePng(bytes: Buffer): Picture {
  let at = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const data: Buffer[] = [];
  while (at < bytes.length) {
    const length = bytes.readUInt32BE(at);
    const type = bytes.toString('latin1', at + 4, at + 8);
    const chunk = bytes.subarray(at + 8, at + 8 + length);
    if (type === 'IHDR') {
      width = chunk.readUInt32BE(0);
      height = chunk.readUInt32BE(4);
      const [depth, colour, , , interlace] = [chunk[8], chunk[9], chunk[10], chunk[11], chunk[12]];
      if (depth !== 8 || (colour !== 2 && colour !== 6) || interlace !== 0) throw new Error(`a PNG this decoder does not read (depth ${depth}, colour type ${colour}, interlace ${interlace})`);
      channels = colour === 2 ? 3 : 4;
    }
    if (type === 'IDAT') data.push(chunk);
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(data));
  const stride = width * channels;
  const pixels = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = pixels.subarray(y * stride, (y + 1) * stride);
    const up = y === 0 ? Buffer.alloc(stride) : pixels.subarray((y - 1) * stride, y * stride);
    for (let i = 0; i < stride; i++) {
      const left = i >= channels ? out[i - channels]! : 0;
      const above = up[i]!;
      const corner = i >= channels ? up[i - channels]! : 0;
      let predicted = 0;
      if (filter === 1) predicted = left;
      else if (filter === 2) predicted = above;
      else if (filter === 3) predicted = (left + above) >> 1;
      else if (filter === 4) {
        const p = left + above - corner;
        const [pa, pb, pc] = [Math.abs(p - left), Math.abs(p - above), Math.abs(p - corner)];
        predicted = pa <= pb && pa <= pc ? left : pb <= pc ? above : corner;
      }
      out[i] = (line[i]! + predicted) & 0xff;
    }
  }
  const hex = (value: number) => value.toString(16).padStart(2, '0');
  return {
    width,
    height,
    rgb(x, y) {
      const i = y * stride + x * channels;
      return `#${hex(pixels[i]!)}${hex(pixels[i + 1]!)}${hex(pixels[i + 2]!)}`;
    },
  };
}

/** How many pixels of each colour a rectangle holds, most common first. */
export function colours(picture: Picture, area = { x: 0, y: 0, width: picture.width, height: picture.height }): Array<[string, number]> {
  const counts = new Map<string, number>();
  for (let y = area.y; y < area.y + area.height; y++) {
    for (let x = area.x; x < area.x + area.width; x++) {
      const colour = picture.rgb(x, y);
      counts.set(colour, (counts.get(colour) ?? 0) + 1);
    }
  }
  return [...counts].sort((a, b) => b[1] - a[1]);
}
