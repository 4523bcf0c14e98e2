import { Type, type Static } from 'typebox';
import { invalidRequest } from '../http/errors.ts';
import type { ScreenSize } from './screen-size.ts';

/**
 * The `computer` tool: the action set of Anthropic's
 * computer-use tool, which agents already speak, checked against the
 * machine's screen and turned into the steps a provider performs.
 */

export const COMPUTER_ACTIONS = [
  'key',
  'type',
  'mouse_move',
  'left_click',
  'right_click',
  'middle_click',
  'double_click',
  'triple_click',
  'left_click_drag',
  'left_mouse_down',
  'left_mouse_up',
  'scroll',
  'hold_key',
  'wait',
  'screenshot',
  'cursor_position',
] as const;

export const COMPUTER_LIMITS = { text: 4000, duration: 100, scrollAmount: 100 } as const;

// An array of two, not a tuple: a tuple's JSON Schema (`items: false`) is one some MCP clients cannot read.
const Coordinate = Type.Array(Type.Integer(), { minItems: 2, maxItems: 2, description: '[x, y] in screen pixels, from the top left' });

/** The `computer` tool's input (TypeBox, as every tool's and route's). */
export const ComputerInput = Type.Object(
  {
    action: Type.Enum(COMPUTER_ACTIONS, { type: 'string' }),
    coordinate: Type.Optional(Coordinate),
    start_coordinate: Type.Optional({ ...Coordinate, description: 'Where left_click_drag starts' }),
    text: Type.Optional(Type.String({ maxLength: COMPUTER_LIMITS.text, description: 'What type types; the key (xdotool names: Return, ctrl+s, alt+Tab) for key and hold_key' })),
    scroll_direction: Type.Optional(Type.Enum(['up', 'down', 'left', 'right'], { type: 'string' })),
    scroll_amount: Type.Optional(Type.Integer({ minimum: 1, maximum: COMPUTER_LIMITS.scrollAmount })),
    duration: Type.Optional(Type.Number({ minimum: 0, maximum: COMPUTER_LIMITS.duration, description: 'Seconds, for wait and hold_key' })),
  },
  { additionalProperties: false },
);

export type ComputerInput = Static<typeof ComputerInput>;

export type Button = 'left' | 'right' | 'middle';

/** One step on the machine's display; a provider performs them in order. */
export type ScreenStep =
  | { step: 'move'; x: number; y: number }
  | { step: 'click'; button: Button; count: number }
  | { step: 'press'; button: Button }
  | { step: 'release'; button: Button }
  | { step: 'scroll'; direction: 'up' | 'down' | 'left' | 'right'; amount: number }
  | { step: 'key'; keys: string }
  | { step: 'hold'; keys: string; seconds: number }
  | { step: 'type'; text: string }
  | { step: 'wait'; seconds: number };

/** What an action does, and whether it answers the cursor's position rather than a screenshot. */
export interface ComputerPlan {
  steps: ScreenStep[];
  answer: 'screenshot' | 'cursor';
}

/** Key names as xdotool reads them: `Return`, `ctrl+shift+t`, `KP_Enter`, one or more separated by spaces. */
const KEYS = /^[A-Za-z0-9_+-]+( [A-Za-z0-9_+-]+)*$/;

function need<T>(value: T | undefined, what: string, action: string): T {
  if (value === undefined) throw invalidRequest(`${action} needs ${what}.`);
  return value;
}

function pointOn(screen: ScreenSize, coordinate: number[], field: string): { x: number; y: number } {
  const [x = 0, y = 0] = coordinate;
  if (x < 0 || y < 0 || x >= screen.width || y >= screen.height) {
    throw invalidRequest(`${field} [${x}, ${y}] is off the screen (${screen.width}×${screen.height}: x from 0 to ${screen.width - 1}, y from 0 to ${screen.height - 1}).`);
  }
  return { x, y };
}

function keysOf(text: string | undefined, action: string): string {
  const keys = need(text, 'text (the key, e.g. "Return" or "ctrl+c")', action).trim();
  if (!KEYS.test(keys)) throw invalidRequest(`"${text}" is not a key name: use xdotool names such as Return, Tab, ctrl+c, alt+F4 or KP_Enter.`);
  return keys;
}

const CLICKS: Record<string, { button: Button; count: number }> = {
  left_click: { button: 'left', count: 1 },
  right_click: { button: 'right', count: 1 },
  middle_click: { button: 'middle', count: 1 },
  double_click: { button: 'left', count: 2 },
  triple_click: { button: 'left', count: 3 },
};

/**
 * The steps of one action on a screen of this size.
 * @throws AppError 400 for a missing or superfluous field, a coordinate off the screen or text that is no key name.
 */
export function planComputerAction(input: ComputerInput, screen: ScreenSize): ComputerPlan {
  const { action } = input;
  const moveTo = (field: 'coordinate' | 'start_coordinate', required: boolean): ScreenStep[] => {
    const coordinate = input[field];
    if (coordinate === undefined) {
      if (required) throw invalidRequest(`${action} needs ${field}.`);
      return [];
    }
    return [{ step: 'move', ...pointOn(screen, coordinate, field) }];
  };
  const noText = () => {
    if (input.text !== undefined) throw invalidRequest(`${action} takes no text.`);
  };
  const shot = (steps: ScreenStep[]): ComputerPlan => ({ steps, answer: 'screenshot' });
  switch (action) {
    case 'screenshot':
      return shot([]);
    case 'cursor_position':
      return { steps: [], answer: 'cursor' };
    case 'mouse_move':
      noText();
      return shot(moveTo('coordinate', true));
    case 'left_click':
    case 'right_click':
    case 'middle_click':
    case 'double_click':
    case 'triple_click':
      noText();
      return shot([...moveTo('coordinate', false), { step: 'click', ...CLICKS[action]! }]);
    case 'left_click_drag':
      return shot([...moveTo('start_coordinate', true), { step: 'press', button: 'left' }, ...moveTo('coordinate', true), { step: 'release', button: 'left' }]);
    case 'left_mouse_down':
      return shot([...moveTo('coordinate', false), { step: 'press', button: 'left' }]);
    case 'left_mouse_up':
      return shot([...moveTo('coordinate', false), { step: 'release', button: 'left' }]);
    case 'scroll':
      return shot([
        ...moveTo('coordinate', false),
        { step: 'scroll', direction: need(input.scroll_direction, 'scroll_direction', action), amount: input.scroll_amount ?? 3 },
      ]);
    case 'key':
      return shot([{ step: 'key', keys: keysOf(input.text, action) }]);
    case 'hold_key':
      return shot([{ step: 'hold', keys: keysOf(input.text, action), seconds: need(input.duration, 'duration (seconds)', action) }]);
    case 'type': {
      const text = need(input.text, 'text', action);
      if (text.length === 0) throw invalidRequest('type needs some text.');
      return shot([{ step: 'type', text }]);
    }
    case 'wait':
      return shot([{ step: 'wait', seconds: need(input.duration, 'duration (seconds)', action) }]);
  }
}
