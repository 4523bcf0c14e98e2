import { strict as assert } from 'node:assert';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import { signatureHeader } from '../../src/event-webhooks/signing.ts';
import { computeSignature, verifyWebhook, WebhookVerificationError } from '../../src/event-webhooks/verify-webhook.js';

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const body = '{"id":"evt_1","type":"machine.created","createdAt":"2026-11-22T10:00:00.000Z","data":{}}';
const now = 1_795_000_000;

describe('signatures', () => {
  test('the header is t=<unix>,v1=<lowercase hex HMAC-SHA256 of "<t>.<body>" keyed with the whole secret>', () => {
    const header = signatureHeader(secret, body, now * 1000 + 999);
    const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${now}.${body}`).digest('hex');
    assert.equal(header, `t=${now},v1=${expected}`);
    assert.equal(computeSignature(secret, now, Buffer.from(body)), expected);
  });

  test('verifyWebhook accepts a good signature and returns the event', () => {
    const event = verifyWebhook(body, signatureHeader(secret, body, now * 1000), secret, { now });
    assert.equal(event.id, 'evt_1');
    assert.equal(verifyWebhook(Buffer.from(body), signatureHeader(secret, body, now * 1000), secret, { now }).type, 'machine.created');
  });

  test('verifyWebhook refuses tampering, other secrets, bad headers and stale timestamps', () => {
    const header = signatureHeader(secret, body, now * 1000);
    const refusals: Array<[string, () => unknown, RegExp]> = [
      ['tampered body', () => verifyWebhook(body.replace('created', 'destroyed'), header, secret, { now }), /no signature matches/],
      ['other secret', () => verifyWebhook(body, header, 'whsec_other', { now }), /no signature matches/],
      ['missing header', () => verifyWebhook(body, undefined, secret, { now }), /missing/],
      ['no timestamp', () => verifyWebhook(body, header.replace(/^t=\d+,/, ''), secret, { now }), /timestamp/],
      ['no v1', () => verifyWebhook(body, `t=${now}`, secret, { now }), /v1/],
      ['too old', () => verifyWebhook(body, header, secret, { now: now + 301 }), /tolerance/],
      ['from the future', () => verifyWebhook(body, header, secret, { now: now - 301 }), /tolerance/],
      ['timestamp changed', () => verifyWebhook(body, header.replace(`t=${now}`, `t=${now + 1}`), secret, { now }), /no signature matches/],
    ];
    for (const [label, run, message] of refusals) assert.throws(run, (error: unknown) => error instanceof WebhookVerificationError && message.test(error.message), label);
  });

  test('the tolerance is inclusive at 300 seconds and configurable', () => {
    const header = signatureHeader(secret, body, now * 1000);
    assert.ok(verifyWebhook(body, header, secret, { now: now + 300 }));
    assert.throws(() => verifyWebhook(body, header, secret, { now: now + 60, toleranceSeconds: 30 }), WebhookVerificationError);
  });

  test('called wrongly it fails closed with a TypeError: a tolerance or clock that is not a number, a parsed body, no secret', () => {
    const header = signatureHeader(secret, body, now * 1000);
    const tenYearsLater = now + 10 * 365 * 86400;
    assert.throws(() => verifyWebhook(body, header, secret, { now: tenYearsLater, toleranceSeconds: Number.NaN }), TypeError);
    assert.throws(() => verifyWebhook(body, header, secret, { now: Number.NaN }), TypeError);
    assert.throws(() => verifyWebhook(body, header, secret, { now, toleranceSeconds: -1 }), TypeError);
    assert.throws(() => verifyWebhook(JSON.parse(body), header, secret, { now }), /not parsed JSON/);
    assert.throws(() => verifyWebhook(body, header, '', { now }), TypeError);
    assert.throws(() => verifyWebhook(body, header, [], { now }), TypeError);
    assert.throws(() => verifyWebhook(body, header, undefined as unknown as string, { now }), TypeError);
  });

  test('only a JSON object is an event', () => {
    for (const text of ['null', '[1,2]', '"text"', '42']) {
      assert.throws(() => verifyWebhook(text, signatureHeader(secret, text, now * 1000), secret, { now }), /not a JSON object/, text);
    }
  });

  test('the HMAC covers the timestamp exactly as the header writes it', () => {
    const padded = `000${now}`;
    const header = `t=${padded},v1=${computeSignature(secret, padded, body)}`;
    assert.equal(verifyWebhook(body, header, secret, { now }).id, 'evt_1');
    const overTheNumber = `t=${padded},v1=${computeSignature(secret, now, body)}`;
    assert.throws(() => verifyWebhook(body, overTheNumber, secret, { now }), /no signature matches/);
  });

  test('several v1 values and several secrets are accepted (rotation on either side)', () => {
    const header = signatureHeader(secret, body, now * 1000);
    const withOther = `${header},v1=${'0'.repeat(64)}`;
    assert.ok(verifyWebhook(body, withOther, secret, { now }));
    assert.ok(verifyWebhook(body, header, ['whsec_old', secret], { now }));
  });
});
