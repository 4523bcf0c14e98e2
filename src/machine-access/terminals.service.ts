import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from '@fastify/websocket';
import { SECOND } from '../shared/clock.ts';
import type { MachineTerminal } from '../providers/provider.ts';
import type { MachineActivity } from '../machines/activity.ts';

/** How long a terminal outlives its page: a reload attaches to it again; past this its processes are hung up on. */
export const TERMINAL_GRACE_MS = 30 * SECOND;
/** What a page attaching again is sent first: the terminal's last output, up to this many bytes. */
export const SCROLLBACK_BYTES = 64 * 1024;
/** Sizes a page may ask for, in characters. */
export const TERMINAL_SIZE_MAX = 1000;
/** Output waiting for a slow page past this pauses the PTY (its programs block on writing) until the page catches up. */
const SEND_HIGH_WATER = 1024 * 1024;

/** WebSocket close codes a page can read. */
export const TERMINAL_CLOSE = {
  /** The shell exited, or the machine stopped under it. */
  ended: 4001,
  /** The terminal was opened by another page since (the newest page has it). */
  taken: 4002,
  /** A text frame that is not a valid `{type: "resize", cols, rows}`. */
  invalidMessage: 4003,
  /** The terminal ended between the check before the upgrade and the upgrade. */
  gone: 4004,
  /** The machine's terminal could not be opened. */
  failed: 4011,
} as const;

export interface TerminalSize {
  cols: number;
  rows: number;
}

interface Terminal {
  id: string;
  accountId: string;
  machineId: string;
  pty: MachineTerminal;
  /** The last output, oldest first, at most SCROLLBACK_BYTES in all. */
  scrollback: Buffer[];
  scrollbackBytes: number;
  socket: WebSocket | null;
  /** Bytes sent to the socket and not yet written out. */
  sending: number;
  grace: ReturnType<typeof setTimeout> | null;
}

export type Terminals = ReturnType<typeof createTerminals>;

/**
 * A client frame: binary is input for the PTY, text a control message. Only
 * `{type: "resize", cols, rows}` (1–1000 each) exists.
 * @returns the size asked for, or why the message is refused
 */
export function parseControlMessage(text: string): TerminalSize | { invalid: string } {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return { invalid: 'a text frame must be JSON: {"type":"resize","cols":…,"rows":…}; input goes in binary frames' };
  }
  const { type, cols, rows } = (message ?? {}) as Record<string, unknown>;
  if (type !== 'resize') return { invalid: 'the only message is {"type":"resize","cols":…,"rows":…}' };
  const fits = (value: unknown) => Number.isInteger(value) && (value as number) >= 1 && (value as number) <= TERMINAL_SIZE_MAX;
  if (!fits(cols) || !fits(rows)) return { invalid: `cols and rows must be whole numbers from 1 to ${TERMINAL_SIZE_MAX}` };
  return { cols: cols as number, rows: rows as number };
}

/**
 * The terminals this process holds for pages: each a PTY in a machine (kept
 * by the agent for as long as the service asks), attached to at most one
 * WebSocket. A page that goes away leaves its terminal for `graceMs`, so a
 * reload attaches to it again and is sent its last output; after that the
 * PTY is closed, which hangs up on its process group (what was started
 * detached, with nohup or setsid, goes on).
 */
export function createTerminals(options: { graceMs: number; logger: FastifyBaseLogger; activity?: MachineActivity }) {
  const open = new Map<string, Terminal>();

  function end(terminal: Terminal, code: number, reason: string): void {
    if (open.get(terminal.id) !== terminal) return;
    open.delete(terminal.id);
    if (terminal.grace !== null) clearTimeout(terminal.grace);
    terminal.pty.close();
    terminal.socket?.close(code, reason);
    terminal.socket = null;
  }

  function keep(terminal: Terminal, chunk: Buffer): void {
    terminal.scrollback.push(chunk);
    terminal.scrollbackBytes += chunk.length;
    while (terminal.scrollbackBytes > SCROLLBACK_BYTES) {
      const oldest = terminal.scrollback[0]!;
      const over = terminal.scrollbackBytes - SCROLLBACK_BYTES;
      if (oldest.length <= over) {
        terminal.scrollback.shift();
        terminal.scrollbackBytes -= oldest.length;
      } else {
        terminal.scrollback[0] = oldest.subarray(over);
        terminal.scrollbackBytes -= over;
      }
    }
  }

  /** Sends output to the page; a page that falls behind pauses the PTY until what it was sent is written out. */
  function send(terminal: Terminal, socket: WebSocket, chunk: Buffer): void {
    terminal.sending += chunk.length;
    socket.send(chunk, () => {
      terminal.sending -= chunk.length;
      if (terminal.sending < SEND_HIGH_WATER / 2 && terminal.pty.output.isPaused()) terminal.pty.output.resume();
    });
    if (terminal.sending > SEND_HIGH_WATER) terminal.pty.output.pause();
  }

  function detach(terminal: Terminal, socket: WebSocket): void {
    if (terminal.socket !== socket) return;
    terminal.socket = null;
    terminal.sending = 0;
    // Nobody reads it now: it goes on into the scrollback.
    terminal.pty.output.resume();
    terminal.grace = setTimeout(() => end(terminal, TERMINAL_CLOSE.ended, 'the page left'), options.graceMs);
    terminal.grace.unref();
  }

  return {
    /** A terminal of this account's machine, if this process holds it. */
    find(accountId: string, machineId: string, id: string): boolean {
      const terminal = open.get(id);
      return terminal !== undefined && terminal.accountId === accountId && terminal.machineId === machineId;
    },

    /** Keeps a PTY just opened, under a new id. */
    add(accountId: string, machineId: string, pty: MachineTerminal): string {
      const id = `term_${randomBytes(16).toString('base64url')}`;
      const terminal: Terminal = { id, accountId, machineId, pty, scrollback: [], scrollbackBytes: 0, socket: null, sending: 0, grace: null };
      open.set(id, terminal);
      // Traffic with a page is activity (activity.ts); output nobody's page receives (the grace period) is not.
      const traffic = options.activity?.traffic(machineId);
      pty.output.on('data', (chunk: Buffer) => {
        keep(terminal, chunk);
        if (terminal.socket !== null) {
          traffic?.();
          send(terminal, terminal.socket, chunk);
        }
      });
      const ended = () => end(terminal, TERMINAL_CLOSE.ended, 'the terminal ended');
      pty.output.once('end', ended);
      pty.output.once('error', (err: Error) => {
        options.logger.debug({ err, machineId }, 'a terminal’s stream failed');
        ended();
      });
      return id;
    },

    /**
     * Gives the terminal to this page (a page that had it is closed): it is
     * told the terminal's id, then sent the scrollback (for a page attaching
     * again), then the output as it comes. Binary frames from the page are
     * input; text frames resize.
     */
    attach(id: string, socket: WebSocket, size: TerminalSize | null): void {
      const terminal = open.get(id);
      socket.resume();
      if (terminal === undefined) return void socket.close(TERMINAL_CLOSE.gone, 'the terminal has ended');
      if (terminal.grace !== null) clearTimeout(terminal.grace);
      terminal.grace = null;
      const previous = terminal.socket;
      terminal.socket = socket;
      terminal.sending = 0;
      previous?.close(TERMINAL_CLOSE.taken, 'the terminal was opened in another page');
      socket.send(JSON.stringify({ type: 'terminal', id }));
      if (terminal.scrollbackBytes > 0) send(terminal, socket, Buffer.concat(terminal.scrollback));
      if (size !== null) terminal.pty.resize(size.cols, size.rows).catch((err: unknown) => options.logger.debug({ err }, 'a terminal could not be resized'));
      const traffic = options.activity?.traffic(terminal.machineId);
      traffic?.();
      socket.on('message', (data: Buffer, binary: boolean) => {
        if (terminal.socket !== socket) return;
        traffic?.();
        if (binary) return terminal.pty.write(data);
        const asked = parseControlMessage(data.toString('utf8'));
        if ('invalid' in asked) return void socket.close(TERMINAL_CLOSE.invalidMessage, asked.invalid.slice(0, 120));
        terminal.pty.resize(asked.cols, asked.rows).catch((err: unknown) => options.logger.debug({ err }, 'a terminal could not be resized'));
      });
      // A page that left while its terminal opened has no close to come: the grace period starts now.
      if (socket.readyState !== socket.OPEN) detach(terminal, socket);
      else socket.once('close', () => detach(terminal, socket));
    },

    /** Ends every terminal at once (the service stops). */
    closeAll(): void {
      for (const terminal of [...open.values()]) end(terminal, 1001, 'the service is stopping');
    },
  };
}
