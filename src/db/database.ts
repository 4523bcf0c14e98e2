import type {
  AccountsTable,
  EmailTokensTable,
  PasskeysTable,
  PendingSignInsTable,
  RecoveryCodesTable,
  SessionsTable,
  SigningKeysTable,
  SpentChallengesTable,
  TotpFactorsTable,
  WebauthnChallengesTable,
} from '../accounts/accounts.tables.ts';
import type { SecurityLogTable } from '../security-log/security-log.tables.ts';
import type { ApiKeysTable } from '../api-keys/api-keys.tables.ts';
import type { RateLimitsTable } from '../rate-limits/rate-limits.tables.ts';
import type { EventsTable } from '../events/events.tables.ts';
import type { DeliveriesTable, DeliveryAttemptsTable, EventEndpointsTable } from '../event-webhooks/event-webhooks.tables.ts';
import type { LiveViewsTable, MachinesTable, PoolsTable, TemplatesTable } from '../machines/machines.tables.ts';
import type { PublicPreviewPortsTable } from '../machine-access/previews/previews.tables.ts';
import type { JobLanesTable, JobsTable } from '../jobs/jobs.tables.ts';
import type { BillingAccountsTable, BillingIdempotencyTable, BillingLedgerTable, BillingMetersTable, BillingUsageDaysTable } from '../billing/billing.tables.ts';
import type { OAuthGrantsTable, OAuthRecordsTable } from '../oauth/oauth.tables.ts';
import type { HostsTable, MachineMovesTable } from '../hosts/hosts.tables.ts';
import type { InboundWebhookReceiptsTable, InboundWebhooksTable, RunsTable, SchedulesTable } from '../runs/runs.tables.ts';

/** Every table, as Kysely sees it. Each domain owns its own table interfaces. */
export interface DB {
  accounts: AccountsTable;
  sessions: SessionsTable;
  email_tokens: EmailTokensTable;
  api_keys: ApiKeysTable;
  rate_limits: RateLimitsTable;
  events: EventsTable;
  event_endpoints: EventEndpointsTable;
  deliveries: DeliveriesTable;
  delivery_attempts: DeliveryAttemptsTable;
  hosts: HostsTable;
  machine_moves: MachineMovesTable;
  machines: MachinesTable;
  pools: PoolsTable;
  templates: TemplatesTable;
  live_views: LiveViewsTable;
  public_preview_ports: PublicPreviewPortsTable;
  runs: RunsTable;
  schedules: SchedulesTable;
  inbound_webhooks: InboundWebhooksTable;
  inbound_webhook_receipts: InboundWebhookReceiptsTable;
  jobs: JobsTable;
  job_lanes: JobLanesTable;
  billing_accounts: BillingAccountsTable;
  billing_ledger: BillingLedgerTable;
  billing_meters: BillingMetersTable;
  billing_usage_days: BillingUsageDaysTable;
  billing_idempotency: BillingIdempotencyTable;
  oauth_records: OAuthRecordsTable;
  oauth_grants: OAuthGrantsTable;
  totp_factors: TotpFactorsTable;
  recovery_codes: RecoveryCodesTable;
  passkeys: PasskeysTable;
  webauthn_challenges: WebauthnChallengesTable;
  pending_sign_ins: PendingSignInsTable;
  security_log: SecurityLogTable;
  signing_keys: SigningKeysTable;
  spent_challenges: SpentChallengesTable;
}
