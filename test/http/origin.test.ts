import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { comesFromOwnOrigin, type OriginHeaders } from '../../src/http/origin.ts';

const OWN = 'https://platform.example.com';

// [method, Sec-Fetch-Site, Origin, allowed]
const TABLE: Array<[string, string | undefined, string | undefined, boolean]> = [
  // The browser says where the request comes from.
  ['POST', 'same-origin', OWN, true],
  ['POST', 'same-origin', undefined, true],
  ['GET', 'same-origin', undefined, true],
  ['GET', 'none', undefined, true],
  ['POST', 'cross-site', undefined, false],
  ['POST', 'cross-site', OWN, false],
  ['GET', 'cross-site', undefined, false],
  ['POST', 'same-site', undefined, false],
  ['GET', 'same-site', OWN, false],
  // Origin alone (older browsers).
  ['POST', undefined, OWN, true],
  ['DELETE', undefined, OWN, true],
  ['POST', undefined, 'https://evil.example', false],
  ['GET', undefined, 'https://evil.example', false],
  ['POST', undefined, 'http://platform.example.com', false],
  ['POST', undefined, 'https://platform.example.com:8443', false],
  ['POST', undefined, 'https://sub.platform.example.com', false],
  ['POST', undefined, 'null', false],
  ['POST', 'same-origin', 'https://evil.example', false],
  // Neither header: safe methods pass, unsafe ones do not.
  ['GET', undefined, undefined, true],
  ['HEAD', undefined, undefined, true],
  ['OPTIONS', undefined, undefined, true],
  ['POST', undefined, undefined, false],
  ['PUT', undefined, undefined, false],
  ['PATCH', undefined, undefined, false],
  ['DELETE', undefined, undefined, false],
];

test('comesFromOwnOrigin truth table (CONTRACT 4)', () => {
  for (const [method, fetchSite, origin, allowed] of TABLE) {
    const headers: OriginHeaders = {};
    if (fetchSite !== undefined) headers['sec-fetch-site'] = fetchSite;
    if (origin !== undefined) headers.origin = origin;
    assert.equal(comesFromOwnOrigin(method, headers, OWN), allowed, `${method} Sec-Fetch-Site=${fetchSite} Origin=${origin}`);
  }
});
