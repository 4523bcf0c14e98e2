import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { promisify } from 'node:util';
import type { PasswordHashCost } from '../config.ts';

const argon2Async = promisify(argon2);
const TAG_LENGTH = 32;
const SALT_LENGTH = 16;

export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 256;

/** argon2id on libuv's thread pool (never the event loop), as a PHC string so the cost can rise later. */
export async function hashPassword(password: string, cost: PasswordHashCost): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const tag = await derive(password, salt, cost);
  return `$argon2id$v=19$m=${cost.memoryKiB},t=${cost.passes},p=${cost.parallelism}$${salt.toString('base64url')}$${tag.toString('base64url')}`;
}

export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const parsed = parsePhc(encoded);
  if (parsed === null) return false;
  const tag = await derive(password, parsed.salt, parsed.cost);
  return tag.length === parsed.tag.length && timingSafeEqual(tag, parsed.tag);
}

export function needsRehash(encoded: string, cost: PasswordHashCost): boolean {
  const parsed = parsePhc(encoded);
  return parsed === null || parsed.cost.memoryKiB < cost.memoryKiB || parsed.cost.passes < cost.passes;
}

const dummyHashes = new Map<string, Promise<string>>();

/**
 * A hash of nothing in particular, verified against when the email is unknown,
 * so that a sign-in for an unknown account costs the same time as a wrong password.
 */
export function dummyPasswordHash(cost: PasswordHashCost): Promise<string> {
  const key = `${cost.memoryKiB}:${cost.passes}:${cost.parallelism}`;
  let hash = dummyHashes.get(key);
  if (hash === undefined) {
    hash = hashPassword(randomBytes(16).toString('hex'), cost);
    dummyHashes.set(key, hash);
  }
  return hash;
}

/**
 * Hashes running at once. Each holds `memoryKiB` and a libuv pool thread (which
 * DNS lookups and file access share), so a burst of sign-ins queues here
 * instead of taking the pool and a gigabyte of memory.
 */
const MAX_CONCURRENT_HASHES = Math.max(1, Math.min(4, availableParallelism()));
let running = 0;
const waiting: Array<() => void> = [];

async function derive(password: string, salt: Buffer, cost: PasswordHashCost): Promise<Buffer> {
  if (running >= MAX_CONCURRENT_HASHES) await new Promise<void>((resolve) => waiting.push(resolve));
  running += 1;
  try {
    return await argon2Async('argon2id', {
      message: password,
      nonce: salt,
      parallelism: cost.parallelism,
      tagLength: TAG_LENGTH,
      memory: cost.memoryKiB,
      passes: cost.passes,
    });
  } finally {
    running -= 1;
    waiting.shift()?.();
  }
}

const PHC = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/;

function parsePhc(encoded: string): { cost: PasswordHashCost; salt: Buffer; tag: Buffer } | null {
  const match = PHC.exec(encoded);
  if (!match) return null;
  return {
    cost: { memoryKiB: Number(match[1]), passes: Number(match[2]), parallelism: Number(match[3]) },
    salt: Buffer.from(match[4]!, 'base64url'),
    tag: Buffer.from(match[5]!, 'base64url'),
  };
}
