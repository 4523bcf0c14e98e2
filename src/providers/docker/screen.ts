import type { Button, ComputerPlan, ScreenStep } from '../computer-use.ts';
import { ActionRefused, type ComputerAnswer, type ProviderMachine, type Screenshot } from '../provider.ts';
import type { AgentChannel, AgentClient } from '../agent/agent-client.ts';
import type { AgentConnections } from './agent-connection.ts';

/** The default image's init keeps this file while it puts the desktop up (machine-image/init). */
export const DESKTOP_STARTING_MARKER = '/tmp/.machine-platform-desktop-starting';
/**
 * What a machine's image must have for a screen: the default image's display (:1), scrot and xdotool.
 * A machine still putting its desktop up is waited for, at most 10 s, so the first screenshot shows the
 * desktop; an image with a display server whose display is not there yet, at most 3 s more (a machine
 * asked the moment it started, before its init could say anything).
 */
const HAS_SCREEN = `n=0; while [ -e ${DESKTOP_STARTING_MARKER} ] && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
if [ ! -e /tmp/.X11-unix/X1 ] && command -v Xvfb >/dev/null 2>&1; then
  n=0; while [ ! -e /tmp/.X11-unix/X1 ] && [ "$n" -lt 30 ]; do sleep 0.1; n=$((n + 1)); done
  n=0; while [ -e ${DESKTOP_STARTING_MARKER} ] && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
fi
[ -e /tmp/.X11-unix/X1 ] && command -v scrot >/dev/null 2>&1 && command -v xdotool >/dev/null 2>&1 || exit 3`;
/** A PNG of the whole display on stdout; exit 5 when scrot made none (it can fail and still leave an empty file). */
export const SCREENSHOT = `f=/tmp/machine-platform-screen-$$.png; if scrot -o -z "$f" && [ -s "$f" ]; then cat "$f"; rm -f "$f"; else rm -f "$f"; exit 5; fi`;
/** xdotool reports an unknown key name on stderr, and goes on: exit 4 with it. */
const KEY_CHECK = `if grep -q 'No such key name' "$e"; then grep -m1 'No such key name' "$e" >&2; rm -f "$e"; exit 4; fi; rm -f "$e"`;

/** Where the default image's init serves the display over VNC, view-only, on the machine's loopback. */
const VNC_PORT = 5901;
/**
 * Where the owner's control session is served: a second x11vnc on the machine's loopback that takes input,
 * started when the owner first asks for control and left running for the next time. Live-view links only
 * ever reach VNC_PORT, whose server ignores input whatever a viewer sends.
 */
export const CONTROL_VNC_PORT = 5902;
/** Started in a session of its own (the agent's exec waits for nothing), serving the display until the machine stops. */
const START_CONTROL_VNC = `command -v x11vnc >/dev/null 2>&1 || exit 3
setsid x11vnc -display :1 -localhost -shared -forever -nopw -quiet -rfbport ${CONTROL_VNC_PORT} </dev/null >/dev/null 2>&1 &`;

const BUTTONS: Record<Button, number> = { left: 1, middle: 2, right: 3 };
const WHEEL = { up: 4, down: 5, left: 6, right: 7 } as const;

/** A word for /bin/sh, whatever it holds. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

function commandOf(step: ScreenStep): string {
  const xdotool = (...words: Array<string | number>) => `xdotool ${words.map((word) => (typeof word === 'number' ? String(word) : shellQuote(word))).join(' ')} 2>>"$e"`;
  switch (step.step) {
    case 'move':
      return xdotool('mousemove', step.x, step.y);
    case 'click':
      return xdotool('click', '--repeat', step.count, '--delay', 80, BUTTONS[step.button]);
    case 'press':
      return xdotool('mousedown', BUTTONS[step.button]);
    case 'release':
      return xdotool('mouseup', BUTTONS[step.button]);
    case 'scroll':
      return xdotool('click', '--repeat', step.amount, '--delay', 20, WHEEL[step.direction]);
    case 'key':
      return xdotool('key', '--clearmodifiers', '--', ...step.keys.split(' '));
    case 'hold':
      return `${xdotool('keydown', '--', ...step.keys.split(' '))}; sleep ${step.seconds}; ${xdotool('keyup', '--', ...step.keys.split(' '))}`;
    case 'type':
      return xdotool('type', '--delay', 8, '--', step.text);
    case 'wait':
      return `sleep ${step.seconds}`;
  }
}

/** A connection to a VNC server in the machine; one just started (or a machine just booted) gets five seconds to listen. */
async function untilServing(agent: AgentClient, port: number): Promise<AgentChannel | null> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const channel = await agent.connectPort(port);
    if (channel !== null) return channel;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return null;
}

class NoDisplay extends Error {
  override name = 'NoDisplay';
}

/** A machine's display through its agent: xdotool for input, scrot for pictures, one short program per action. */
export function dockerScreen(agents: AgentConnections) {
  async function perform(machine: ProviderMachine, script: string): Promise<Buffer> {
    const { stdout, stderr, exitCode } = await (await agents.of(machine.id)).exec(['/bin/sh', '-c', `${HAS_SCREEN}\ne=$(mktemp)\n${script}`]);
    if (exitCode === 3) throw new NoDisplay(`${machine.name} has no display`);
    if (exitCode === 4) throw new ActionRefused(stderr.toString('utf8').trim().replace(/^\(symbol\) /, '').replace(/\. Ignoring it\.$/, ''));
    if (exitCode !== 0) throw new Error(`the display did not answer (exit ${exitCode}): ${stderr.toString('utf8').trim()}`);
    return stdout;
  }

  async function withDisplay(act: () => Promise<Buffer>): Promise<Buffer | null> {
    try {
      return await act();
    } catch (error) {
      if (error instanceof NoDisplay) return null;
      throw error;
    }
  }

  return {
    /**
     * A session of the machine's view-only VNC server (the default image's
     * init starts x11vnc on the machine's own loopback, port 5901), relayed by
     * the agent: no port of the machine is reachable from outside it. Null for
     * an image without a screen or that server.
     */
    async stream(machine: ProviderMachine): Promise<AgentChannel | null> {
      const agent = await agents.of(machine.id);
      if ((await agent.exec(['/bin/sh', '-c', HAS_SCREEN])).exitCode !== 0) return null;
      return untilServing(agent, VNC_PORT);
    },

    /**
     * A session of the machine's VNC server that takes input (port 5902 on
     * its loopback), started on the first call; null for an image without a
     * screen or x11vnc.
     */
    async control(machine: ProviderMachine): Promise<AgentChannel | null> {
      const agent = await agents.of(machine.id);
      const running = await agent.connectPort(CONTROL_VNC_PORT);
      if (running !== null) return running;
      if ((await agent.exec(['/bin/sh', '-c', `${HAS_SCREEN}\n${START_CONTROL_VNC}`])).exitCode !== 0) return null;
      return untilServing(agent, CONTROL_VNC_PORT);
    },

    /** Null for an image without a screen. */
    async screenshot(machine: ProviderMachine): Promise<Screenshot | null> {
      const body = await withDisplay(() => perform(machine, SCREENSHOT));
      return body === null ? null : { contentType: 'image/png', body, ...machine.screen };
    },

    /** Null for an image without a screen. @throws ActionRefused for a key xdotool does not know. */
    async computer(machine: ProviderMachine, plan: ComputerPlan): Promise<ComputerAnswer | null> {
      if (plan.answer === 'cursor') {
        const out = await withDisplay(() => perform(machine, `xdotool getmouselocation --shell 2>>"$e"; rm -f "$e"`));
        if (out === null) return null;
        const text = out.toString('latin1');
        return { cursor: { x: Number(/^X=(\d+)/m.exec(text)?.[1]), y: Number(/^Y=(\d+)/m.exec(text)?.[1]) } };
      }
      const steps = plan.steps.map(commandOf).join('\n');
      const body = await withDisplay(() => perform(machine, `${steps}\n${KEY_CHECK}\n${SCREENSHOT}`));
      return body === null ? null : { screenshot: { contentType: 'image/png', body, ...machine.screen } };
    },
  };
}
