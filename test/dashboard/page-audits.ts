// Checks run inside a dashboard page, shared by the browser tests and
// `npm run screenshots`: horizontal overflow, accessible names, a visible focus
// indicator at every tab stop, and text contrast. Each returns what is wrong,
// one sentence per problem, so a failure names the element.
import type { CDPSession, Page } from 'playwright-core';

/** The widths every page must fit: a phone, a tablet, a small laptop, a desktop. */
export const LAYOUT_WIDTHS = [375, 768, 1024, 1280] as const;

/** Loaded, drawn, and nothing still loading (every list shows `.loading` until its answer is drawn). */
export async function settled(page: Page): Promise<void> {
  await page.waitForLoadState('load');
  await page.waitForFunction(() => !document.querySelector('#app[aria-busy], .loading, [aria-busy="true"]'));
}

/** Roles a person operates: each needs a name that says what it does. */
const INTERACTIVE_ROLES = new Set([
  'button', 'link', 'textbox', 'searchbox', 'checkbox', 'radio', 'combobox', 'listbox', 'menuitem',
  'menuitemcheckbox', 'menuitemradio', 'option', 'switch', 'slider', 'spinbutton', 'tab',
]);

/**
 * Nothing is wider than the screen or than its container: the page does not
 * scroll sideways, no box scrolls or clips its content horizontally (an
 * ellipsis on purpose excepted), and no element sticks out of its parent.
 */
export function layoutProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const problems: string[] = [];
    const describe = (element: Element) => {
      const classes = element.classList.length > 0 ? `.${[...element.classList].join('.')}` : '';
      const text = (element.textContent ?? '').trim().replace(/\s+/g, ' ').slice(0, 40);
      return `<${element.tagName.toLowerCase()}${element.id ? `#${element.id}` : ''}${classes}> "${text}"`;
    };
    const root = document.documentElement;
    if (root.scrollWidth > root.clientWidth) problems.push(`the page scrolls sideways by ${root.scrollWidth - root.clientWidth}px`);
    for (const element of document.body.querySelectorAll('*')) {
      if (element.closest('.visually-hidden')) continue;
      const style = getComputedStyle(element);
      const box = element.getBoundingClientRect();
      if (style.visibility === 'hidden' || (box.width === 0 && box.height === 0)) continue;
      const isField = element instanceof HTMLInputElement || element instanceof HTMLTextAreaElement || element instanceof HTMLSelectElement;
      if (!isField && style.overflowX !== 'visible' && style.textOverflow !== 'ellipsis' && element.scrollWidth > element.clientWidth + 1) {
        problems.push(`${describe(element)} holds ${element.scrollWidth}px of content in ${element.clientWidth}px (overflow-x: ${style.overflowX})`);
      }
      if (box.right > window.innerWidth + 1 || box.left < -1) {
        problems.push(`${describe(element)} reaches ${Math.round(box.left)}–${Math.round(box.right)}px on a ${window.innerWidth}px screen`);
        continue;
      }
      if (style.position === 'fixed' || style.position === 'absolute') continue;
      const parent = element.parentElement;
      if (parent === null || parent === document.body) continue;
      const outer = parent.getBoundingClientRect();
      if (box.right > outer.right + 1 || box.left < outer.left - 1) {
        problems.push(`${describe(element)} (${Math.round(box.left)}–${Math.round(box.right)}px) sticks out of ${describe(parent)} (${Math.round(outer.left)}–${Math.round(outer.right)}px)`);
      }
    }
    return problems;
  });
}

/** Every control a person can operate, as Chromium's accessibility tree sees it, has a name. */
export async function unnamedControls(page: Page): Promise<string[]> {
  const cdp = await page.context().newCDPSession(page);
  try {
    const { nodes } = await cdp.send('Accessibility.getFullAXTree');
    const unnamed = nodes.filter((node) => !node.ignored && INTERACTIVE_ROLES.has(String(node.role?.value)) && String(node.name?.value ?? '').trim() === '');
    return Promise.all(unnamed.map(async (node) => `${node.role?.value} without a name: ${await outerHtml(cdp, node.backendDOMNodeId)}`));
  } finally {
    await cdp.detach();
  }
}

async function outerHtml(cdp: CDPSession, backendNodeId: number | undefined): Promise<string> {
  if (backendNodeId === undefined) return '(no DOM node)';
  const { outerHTML } = await cdp.send('DOM.getOuterHTML', { backendNodeId });
  return outerHTML.slice(0, 160);
}

export interface TabStop {
  /** Role and accessible name, as a screen reader announces it: `button "Sign out"`. */
  label: string;
  /** Empty when the focus indicator is visible; otherwise why not. */
  problem: string;
}

/**
 * Presses Tab from the top of the page until focus leaves it (or comes round
 * again) and reports each stop: its role and name, and whether it shows a
 * focus indicator (an outline or a box shadow that no ancestor clips).
 */
export async function walkTabStops(page: Page, maxStops = 120): Promise<TabStop[]> {
  await page.evaluate(() => {
    (document.activeElement as HTMLElement | null)?.blur();
    window.getSelection()?.removeAllRanges();
  });
  const cdp = await page.context().newCDPSession(page);
  const stops: TabStop[] = [];
  const seen = new Set<string>();
  try {
    for (let i = 0; i < maxStops; i++) {
      await page.keyboard.press('Tab');
      const state = await page.evaluate(() => {
        const element = document.activeElement;
        if (!(element instanceof HTMLElement) || element === document.body) return null;
        const key = `${element.tagName}|${element.id}|${element.getAttribute('aria-label') ?? ''}|${(element.textContent ?? '').slice(0, 60)}|${element.getAttribute('name') ?? ''}|${element.getAttribute('value') ?? ''}|${Math.round(element.getBoundingClientRect().top + scrollY)}`;
        const style = getComputedStyle(element);
        const outline = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 1 && !/rgba\(.*,\s*0\)|transparent/.test(style.outlineColor);
        const shadow = style.boxShadow !== 'none';
        let problem = outline || shadow ? '' : 'no outline or box shadow when focused';
        if (problem === '') {
          // The ring lies outside the border box; an ancestor that clips must leave room for it.
          const reach = outline ? parseFloat(style.outlineOffset) + parseFloat(style.outlineWidth) : 2;
          const box = element.getBoundingClientRect();
          for (let parent = element.parentElement; parent && parent !== document.body; parent = parent.parentElement) {
            const clip = getComputedStyle(parent);
            if (clip.overflowX === 'visible' && clip.overflowY === 'visible') continue;
            const area = parent.getBoundingClientRect();
            const cut = Math.max(area.left - (box.left - reach), (box.right + reach) - area.right, area.top - (box.top - reach), (box.bottom + reach) - area.bottom);
            if (cut > 1) problem = `its focus ring is cut by ${Math.round(cut)}px by <${parent.tagName.toLowerCase()} class="${parent.className}">`;
          }
        }
        return { key, problem };
      });
      if (state === null || seen.has(state.key)) break;
      seen.add(state.key);
      stops.push({ label: await focusedLabel(cdp), problem: state.problem });
    }
  } finally {
    await cdp.detach();
  }
  return stops;
}

/**
 * Role and accessible name of the focused element, from Chromium's accessibility tree.
 * A page that redraws (a polled list) can replace the node between the two
 * calls; the question is then asked again of the new one.
 */
async function focusedLabel(cdp: CDPSession): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      const { root } = await cdp.send('DOM.getDocument', { depth: 0 });
      const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: ':focus' });
      if (!nodeId) return '(nothing focused)';
      const { nodes } = await cdp.send('Accessibility.getPartialAXTree', { nodeId, fetchRelatives: false });
      const node = nodes[0];
      return `${node?.role?.value ?? '?'} "${String(node?.name?.value ?? '').trim()}"`;
    } catch (error) {
      if (attempt >= 5 || !/Could not find node/.test(String(error))) throw error;
    }
  }
}

/**
 * Text contrast from computed styles (WCAG 2: 4.5:1, or 3:1 for large text;
 * always 4.5:1 on buttons, badges, alerts and toasts), over the colour that
 * actually lies behind the text, blended through translucent layers. Disabled
 * controls are exempt; with a dialog open, only the dialog counts.
 */
export function contrastProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const canvas = document.createElement('canvas');
    canvas.width = 1;
    canvas.height = 1;
    const context = canvas.getContext('2d', { willReadFrequently: true })!;
    /** Any CSS colour (rgb(), color(srgb …), oklab() …) as 8-bit sRGB and alpha 0–1. */
    const rgba = (css: string): [number, number, number, number] => {
      context.clearRect(0, 0, 1, 1);
      context.fillStyle = '#000';
      context.fillStyle = css;
      context.fillRect(0, 0, 1, 1);
      const [r = 0, g = 0, b = 0, a = 0] = context.getImageData(0, 0, 1, 1).data;
      return [r, g, b, a / 255];
    };
    const over = (top: [number, number, number, number], bottom: [number, number, number]): [number, number, number] =>
      [0, 1, 2].map((i) => top[i]! * top[3] + bottom[i]! * (1 - top[3])) as [number, number, number];
    const luminance = ([r, g, b]: [number, number, number]) => {
      const channel = (value: number) => {
        const v = value / 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      };
      return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
    };
    const ratio = (a: [number, number, number], b: [number, number, number]) => {
      const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
      return (light + 0.05) / (dark + 0.05);
    };
    /** The opaque colour behind an element: its own background and its ancestors', blended bottom-up. */
    const backdrop = (element: Element | null): [number, number, number] => {
      const layers: Array<[number, number, number, number]> = [];
      for (let node = element; node; node = node.parentElement) {
        const layer = rgba(getComputedStyle(node).backgroundColor);
        if (layer[3] > 0) layers.push(layer);
        if (layer[3] >= 1) break;
      }
      let colour: [number, number, number] = [255, 255, 255];
      if (layers.at(-1)?.[3] !== 1) colour = over(rgba(getComputedStyle(document.documentElement).backgroundColor), colour);
      for (const layer of layers.reverse()) colour = over(layer, colour);
      return colour;
    };
    const strict = '.btn, .badge, .alert, .toast, .banner';
    const dialog = document.querySelector('dialog[open]');
    const problems: string[] = [];
    const check = (element: Element, text: string, color: string, background: [number, number, number], where: string) => {
      const style = getComputedStyle(element);
      const size = parseFloat(style.fontSize);
      const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
      const needed = element.closest(strict) || !large ? 4.5 : 3;
      const foreground = over(rgba(color), background);
      const value = ratio(foreground, background);
      if (value < needed - 0.005) {
        problems.push(`${value.toFixed(2)}:1 (needs ${needed}:1) for ${where} "${text.slice(0, 30)}" in <${element.tagName.toLowerCase()} class="${element.className}">: rgb(${foreground.map(Math.round).join(' ')}) on rgb(${background.map(Math.round).join(' ')})`);
      }
    };
    for (const element of document.body.querySelectorAll('*')) {
      if (element.closest('.visually-hidden, [disabled], [aria-disabled="true"]')) continue;
      if (dialog && !dialog.contains(element)) continue;
      const box = element.getBoundingClientRect();
      const style = getComputedStyle(element);
      if (box.width === 0 || box.height === 0 || style.visibility === 'hidden' || Number(style.opacity) === 0) continue;
      const text = [...element.childNodes].filter((node) => node.nodeType === Node.TEXT_NODE).map((node) => node.textContent ?? '').join('').trim();
      if (text !== '') check(element, text, style.color, backdrop(element), 'text');
      // Symbols drawn in ::before on a badge of colour (the alerts' "!", "✓", "i").
      const before = getComputedStyle(element, '::before');
      const symbol = before.content.replace(/^"|"$/g, '');
      if (before.content !== 'none' && symbol.trim() !== '' && rgba(before.backgroundColor)[3] > 0) {
        check(element, symbol, before.color, over(rgba(before.backgroundColor), backdrop(element)), 'symbol');
      }
    }
    return problems;
  });
}
