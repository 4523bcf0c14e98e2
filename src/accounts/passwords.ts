import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { promisify } from 'node:util';
import type { PasswordHashCost } from '../config.ts';
import { hashingBusy } from './accounts.errors.ts';

const argon2Async = promisify(argon2);
const TAG_LENGTH = 32;
const SALT_LENGTH = 16;

export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 256;

/**
 * argon2id on libuv's thread pool (never the event loop), as a PHC string so the cost can rise later.
 * @throws AppError 503 when the hashing queue is full.
 */
export async function hashPassword(password: string, cost: PasswordHashCost): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const tag = await derive(password, salt, cost);
  return `$argon2id$v=19$m=${cost.memoryKiB},t=${cost.passes},p=${cost.parallelism}$${salt.toString('base64url')}$${tag.toString('base64url')}`;
}

/** @throws AppError 503 when the hashing queue is full. */
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
 * Started when the accounts routes are built (not at the first unknown email,
 * which would then pay for two hashes); a sign-in that comes sooner awaits it.
 */
export function dummyPasswordHash(cost: PasswordHashCost): Promise<string> {
  const key = `${cost.memoryKiB}:${cost.passes}:${cost.parallelism}`;
  let hash = dummyHashes.get(key);
  if (hash === undefined) {
    hash = hashPassword(randomBytes(16).toString('hex'), cost);
    dummyHashes.set(key, hash);
    // A failed attempt (a full queue) is forgotten, so that the next sign-in tries again.
    hash.catch(() => dummyHashes.delete(key));
  }
  return hash;
}

/**
 * Hashes running at once. Each holds `memoryKiB` and a libuv pool thread (which
 * DNS lookups and file access share), so a burst of sign-ins queues here
 * instead of taking the pool and a gigabyte of memory.
 */
const MAX_CONCURRENT_HASHES = Math.max(1, Math.min(4, availableParallelism()));
/**
 * Hashes waiting for a slot. The queue is shared by sign-in, sign-up, reset and
 * password change; unbounded, a flood would hold every request (and its memory)
 * for minutes. 64 waiting at OWASP's cost is about a second's work on 2–4 cores.
 */
export const MAX_QUEUED_HASHES = 64;
let running = 0;
let started = 0;
/** Recent time one hash takes, to tell a refused caller when the queue will have drained. */
let averageHashMs = 50;
const waiting: Array<() => void> = [];

export interface PasswordHashingLoad {
  running: number;
  queued: number;
  /** Hashes started since the process began (sign-in checks included). */
  started: number;
}

export function passwordHashingLoad(): PasswordHashingLoad {
  return { running, queued: waiting.length, started };
}

/** @throws AppError 503 service_unavailable, with Retry-After, when the queue is full. */
async function acquireSlot(): Promise<void> {
  if (running < MAX_CONCURRENT_HASHES) {
    running += 1;
    return;
  }
  if (waiting.length >= MAX_QUEUED_HASHES) {
    const drainMs = ((waiting.length + running) * averageHashMs) / MAX_CONCURRENT_HASHES;
    throw hashingBusy(Math.max(1, Math.ceil(drainMs / 1000)));
  }
  // The slot is handed over by releaseSlot, so a newcomer cannot take it in between.
  await new Promise<void>((resolve) => waiting.push(resolve));
}

function releaseSlot(): void {
  const next = waiting.shift();
  if (next) next();
  else running -= 1;
}

async function derive(password: string, salt: Buffer, cost: PasswordHashCost): Promise<Buffer> {
  await acquireSlot();
  started += 1;
  const startedAt = performance.now();
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
    averageHashMs = averageHashMs * 0.9 + (performance.now() - startedAt) * 0.1;
    releaseSlot();
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
