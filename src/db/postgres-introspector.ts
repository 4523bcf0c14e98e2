import { PostgresIntrospector, sql } from 'kysely';
import { DEFAULT_MIGRATION_LOCK_TABLE, DEFAULT_MIGRATION_TABLE } from 'kysely/migration';
import type { DatabaseIntrospector, DatabaseMetadataOptions, Kysely, SchemaMetadata, TableMetadata } from 'kysely';

interface ColumnRow {
  table: string;
  kind: string;
  schema: string;
  column: string;
  not_null: boolean;
  has_default: boolean;
  type: string;
  type_schema: string;
  comment: string | null;
  auto_incrementing: string | null;
}

/**
 * Kysely's PostgresIntrospector reads the tables of every schema in the
 * database, calling pg_get_serial_sequence on each, and fails ("schema ...
 * does not exist") when some other schema is dropped during the scan: a
 * service migrating in a database it shares, as test runs do, would fail at
 * random. The Migrator, its one user here, only asks about our own schema,
 * so this introspector reads only current_schema().
 */
export class CurrentSchemaIntrospector implements DatabaseIntrospector {
  readonly #db: Kysely<unknown>;

  constructor(db: Kysely<unknown>) {
    this.#db = db;
  }

  getSchemas(): Promise<SchemaMetadata[]> {
    return new PostgresIntrospector(this.#db).getSchemas();
  }

  async getTables(options: DatabaseMetadataOptions = { withInternalKyselyTables: false }): Promise<TableMetadata[]> {
    const internal = [DEFAULT_MIGRATION_TABLE, DEFAULT_MIGRATION_LOCK_TABLE];
    const { rows } = await sql<ColumnRow>`
      select c.relname as "table", c.relkind as kind, ns.nspname as "schema", a.attname as "column",
             a.attnotnull as not_null, a.atthasdef as has_default, typ.typname as "type", tns.nspname as type_schema,
             col_description(a.attrelid, a.attnum) as "comment",
             pg_get_serial_sequence(quote_ident(ns.nspname) || '.' || quote_ident(c.relname), a.attname) as auto_incrementing
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_class c on a.attrelid = c.oid
      join pg_catalog.pg_namespace ns on c.relnamespace = ns.oid
      join pg_catalog.pg_type typ on a.atttypid = typ.oid
      join pg_catalog.pg_namespace tns on typ.typnamespace = tns.oid
      where ns.nspname = current_schema() and c.relkind in ('r', 'v', 'p', 'f')
        and a.attnum >= 0 and not a.attisdropped
        and (${options.withInternalKyselyTables} or c.relname not in (${sql.join(internal)}))
      order by c.relname, a.attnum`.execute(this.#db);
    return tablesOf(rows);
  }
}

function tablesOf(rows: ColumnRow[]): TableMetadata[] {
  const tables = new Map<string, TableMetadata>();
  for (const row of rows) {
    let table = tables.get(row.table);
    if (table === undefined) {
      table = { name: row.table, schema: row.schema, isView: row.kind === 'v', isForeign: row.kind === 'f', columns: [] };
      tables.set(row.table, table);
    }
    table.columns.push({
      name: row.column,
      dataType: row.type,
      dataTypeSchema: row.type_schema,
      isNullable: !row.not_null,
      hasDefaultValue: row.has_default,
      isAutoIncrementing: row.auto_incrementing !== null,
      comment: row.comment ?? undefined,
    });
  }
  return [...tables.values()];
}
