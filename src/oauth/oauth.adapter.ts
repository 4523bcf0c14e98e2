import type { Adapter, AdapterPayload } from 'oidc-provider';
import type { Deps } from '../deps.ts';
import { hashToken } from '../shared/secrets.ts';
import { consumeRecord, deleteGrantEverywhere, deleteGrantRecords, deleteRecord, findRecord, findRecordByUid, upsertRecord } from './oauth.repository.ts';

type AdapterDeps = Pick<Deps, 'db' | 'clock'>;

/**
 * oidc-provider's storage on our database: one table for every model, each
 * row keyed by the SHA-256 of the model's id, so access and refresh tokens
 * (whose ids are the tokens themselves) are stored only as hashes, like every
 * other token. Expiry follows the injected clock; the maintenance job deletes
 * what has expired. A grant's tokens of one kind go together (`revokeByGrantId`);
 * destroying the grant itself takes all its records along, and its row in
 * `oauth_grants`, which is what makes its tokens work.
 */
export function createAdapterFactory(deps: AdapterDeps): (name: string) => Adapter {
  return (kind) => new KyselyAdapter(deps, kind);
}

class KyselyAdapter implements Adapter {
  readonly #deps: AdapterDeps;
  readonly #kind: string;

  constructor(deps: AdapterDeps, kind: string) {
    this.#deps = deps;
    this.#kind = kind;
  }

  async upsert(id: string, { jti: _id, ...payload }: AdapterPayload, expiresIn: number): Promise<void> {
    // The id (`jti`: the token itself, for tokens and codes) is left out of the payload, and put back by find().
    const now = this.#deps.clock.now();
    await upsertRecord(this.#deps.db, {
      kind: this.#kind,
      id_hash: hashToken(id),
      payload: JSON.stringify(payload),
      // A grant is its own grant: destroying it takes every record of it along.
      grant_id: this.#kind === 'Grant' ? id : typeof payload.grantId === 'string' ? payload.grantId : null,
      uid: typeof payload.uid === 'string' ? payload.uid : null,
      expires_at: expiresIn ? now + expiresIn * 1000 : null,
    });
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    const payload = payloadOf(await findRecord(this.#deps.db, this.#kind, hashToken(id), this.#deps.clock.now()));
    return payload === undefined ? undefined : { ...payload, jti: id };
  }

  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    return payloadOf(await findRecordByUid(this.#deps.db, this.#kind, uid, this.#deps.clock.now()));
  }

  async findByUserCode(): Promise<AdapterPayload | undefined> {
    // The device flow is not enabled: there are no user codes.
    return undefined;
  }

  async consume(id: string): Promise<void> {
    await consumeRecord(this.#deps.db, this.#kind, hashToken(id), Math.floor(this.#deps.clock.now() / 1000));
  }

  async destroy(id: string): Promise<void> {
    if (this.#kind === 'Grant') await deleteGrantEverywhere(this.#deps.db, id);
    else await deleteRecord(this.#deps.db, this.#kind, hashToken(id));
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    await deleteGrantRecords(this.#deps.db, this.#kind, grantId);
  }
}

function payloadOf(row: { payload: string; consumed_at: number | null } | undefined): AdapterPayload | undefined {
  if (row === undefined) return undefined;
  const payload = JSON.parse(row.payload) as AdapterPayload;
  return row.consumed_at === null ? payload : { ...payload, consumed: row.consumed_at };
}
