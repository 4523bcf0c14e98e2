import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchBrowser, newContext, startLiveApp, useSession, watchConsole, type LiveApp } from '../support/browser.ts';
import { LAYOUT_WIDTHS, layoutProblems, settled } from './page-audits.ts';
import { seedShowcase, SHOWCASE_ENV, type Showcase } from './showcase.ts';

/** Every page and the main dialogs, filled with the widest content, at each width the dashboard must fit. */
describe('dashboard in Chromium: every page fits 375, 768, 1024 and 1280 px', () => {
  let live: LiveApp;
  let browser: Browser;
  let showcase: Showcase;
  const problems: string[] = [];

  before(async () => {
    live = await startLiveApp({ env: SHOWCASE_ENV });
    browser = await launchBrowser();
    showcase = await seedShowcase(live);
  });
  after(async () => {
    await browser?.close();
    await live?.close();
  });

  const contextAt = async (width: number, signedIn: boolean): Promise<BrowserContext> => {
    const context = await newContext(browser, { viewport: { width, height: 800 } });
    if (signedIn) await useSession(context, live, showcase.user.session);
    return context;
  };
  const open = async (page: Page, path: string) => {
    await page.goto(`${live.baseUrl}${path}`);
    await settled(page);
  };

  for (const width of LAYOUT_WIDTHS) {
    test(`${width} px: no page scrolls sideways and no element is wider than its container`, async () => {
      const found: string[] = [];
      for (const [signedIn, paths] of [[false, showcase.guestPaths], [true, showcase.userPaths]] as const) {
        const context = await contextAt(width, signedIn);
        const page = await context.newPage();
        problems.push(...watchConsole(page));
        for (const path of paths) {
          await open(page, path);
          found.push(...(await layoutProblems(page)).map((problem) => `${path}: ${problem}`));
        }
        if (signedIn) {
          for (const [path, button] of [['/machines', 'Create machine'], ['/event-webhooks', 'Add endpoint'], ['/account/api-keys', 'Create API key'], [`/machines/${showcase.machineId}`, `Output of run ${showcase.runId}`]] as const) {
            await open(page, path);
            await page.getByRole('button', { name: button }).click();
            await page.getByRole('dialog').waitFor();
            found.push(...(await layoutProblems(page)).map((problem) => `${path}, dialog "${button}": ${problem}`));
          }
        }
        await context.close();
      }
      assert.deepEqual(found, []);
    });
  }

  test('the Machines table shows every action whole, on one line, at 1024 and 1280 px (was cut to "Destro")', async () => {
    for (const width of [1024, 1280]) {
      const context = await contextAt(width, true);
      const page = await context.newPage();
      await open(page, '/machines');
      const rows = await page.locator('tbody tr').evaluateAll((elements) => elements.map((row) => {
        const wrap = row.closest('.table-wrap')!.getBoundingClientRect();
        const buttons = [...row.querySelectorAll('td.table__actions button')].map((button) => ({ text: button.textContent, box: button.getBoundingClientRect(), scroll: button.scrollWidth, client: button.clientWidth }));
        return { wrapRight: wrap.right, buttons };
      }));
      const running = rows.find((row) => row.buttons.some((button) => button.text === 'Live view'));
      assert.deepEqual(running?.buttons.map((button) => button.text), ['Live view', 'Stop', 'New MCP token', 'Destroy'], `${width} px`);
      for (const row of rows) {
        for (const button of row.buttons) {
          assert.ok(button.box.right <= row.wrapRight, `${width} px: "${button.text}" ends inside the card`);
          assert.ok(button.scroll <= button.client, `${width} px: "${button.text}" is not cut`);
          assert.equal(Math.round(button.box.top), Math.round(row.buttons[0]!.box.top), `${width} px: "${button.text}" is on the same line as the others`);
        }
      }
      await context.close();
    }
  });

  test('from 768 px up the top bar keeps brand, navigation and "Sign out" on one row (at 768 they wrapped alone)', async () => {
    for (const width of [768, 1024, 1280]) {
      const context = await contextAt(width, true);
      const page = await context.newPage();
      await open(page, '/machines');
      const rows = await page.evaluate(() => ['.brand', '.nav', '.usermenu .btn'].map((selector) => {
        const box = document.querySelector(`.topbar ${selector}`)!.getBoundingClientRect();
        return Math.round(box.top + box.height / 2);
      }));
      assert.ok(Math.max(...rows) - Math.min(...rows) <= 4, `${width} px: brand, navigation and Sign out share a row (centres at ${rows.join(', ')} px)`);
      await context.close();
    }
  });

  test('a long endpoint description stays a one-line title; the whole of it is its name and tooltip', async () => {
    const description = 'Orders service in the EU region, consumed by the fulfilment team and mirrored to the audit log';
    for (const width of [375, 1280]) {
      const context = await contextAt(width, true);
      const page = await context.newPage();
      await open(page, `/event-webhooks/${showcase.endpointId}`);
      const title = page.getByRole('heading', { level: 1, name: description });
      const [height, lineHeight, tooltip] = await title.evaluate((element) => [element.getBoundingClientRect().height, parseFloat(getComputedStyle(element).lineHeight), element.getAttribute('title')] as const);
      assert.ok(height < lineHeight * 1.5, `${width} px: the title is one line (${height}px for a ${lineHeight}px line)`);
      assert.equal(tooltip, description);
      await context.close();
    }
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});

