import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { notFound } from '../http/errors.ts';
import { assertSocketFromOwnPage } from '../http/origin.ts';
import { IdParamsSchema } from '../http/schemas.ts';
import { notSupported, wrongStatus } from '../machines/machines.errors.ts';
import { toProviderMachine } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import { createTerminals, TERMINAL_CLOSE, TERMINAL_GRACE_MS, TERMINAL_SIZE_MAX } from './terminals.service.ts';

const tags = ['machines'];
const Size = Type.Integer({ minimum: 1, maximum: TERMINAL_SIZE_MAX });
const TerminalQuery = Type.Object({
  terminal: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'A terminal this account opened on this machine, to attach to again (within its grace period)' })),
  cols: Type.Optional(Size),
  rows: Type.Optional(Size),
}, { additionalProperties: false });

type TerminalRequest = FastifyRequest<{ Params: { id: string }; Querystring: { terminal?: string; cols?: number; rows?: number } }>;

/**
 * The machine's terminal: a WebSocket to a PTY in the machine,
 * for the signed-in dashboard of the machine's own origin or an API key.
 * Everything that can be refused is refused before the upgrade, as an HTTP
 * problem; the socket then carries binary frames (the PTY's bytes both ways)
 * and text frames (JSON: `{type: "resize", cols, rows}` from the page,
 * `{type: "terminal", id}` to it once attached).
 */
export const terminalRoutes: FastifyPluginAsyncTypebox<{ graceMs?: number }> = async (app, options) => {
  const { deps, machineProvider: provider } = app;
  const terminals = createTerminals({ graceMs: options.graceMs ?? TERMINAL_GRACE_MS, logger: deps.logger, activity: app.machineActivity });
  app.addHook('onClose', async () => terminals.closeAll());

  /** @throws AppError 403 cross_site, 404 machine or terminal, 409 not running or no terminals here. */
  async function admit(request: TerminalRequest) {
    assertSocketFromOwnPage(request, deps.config.publicUrl);
    const accountId = accountIdOf(request);
    const machine = await getMachineRow(deps, accountId, request.params.id);
    if (provider.openTerminal === undefined) throw notSupported('terminals', provider.name);
    if (machine.status !== 'running') throw wrongStatus('open a terminal', machine.status);
    const attachTo = request.query.terminal;
    if (attachTo !== undefined && !terminals.find(accountId, machine.id, attachTo)) throw notFound('The terminal');
    return machine;
  }

  app.get('/api/machines/:id/terminal', {
    schema: {
      tags,
      summary: 'A terminal in the machine: upgrades to a WebSocket (the session from the dashboard\'s own origin, or an API key)',
      params: IdParamsSchema,
      querystring: TerminalQuery,
    },
    preHandler: async (request) => void (await admit(request as TerminalRequest)),
    websocket: true,
  }, async (socket, request) => {
    // The page types as soon as its socket opens; the PTY may take a while to open (a loaded engine). Nothing is
    // read from the page until the terminal takes the socket (attach resumes it), so no keystroke is lost.
    socket.pause();
    const { query, params } = request as TerminalRequest;
    const size = query.cols !== undefined && query.rows !== undefined ? { cols: query.cols, rows: query.rows } : null;
    if (query.terminal !== undefined) return terminals.attach(query.terminal, socket, size);
    const machine = await getMachineRow(deps, accountIdOf(request), params.id);
    let id: string;
    try {
      const pty = await provider.openTerminal!(toProviderMachine(machine), size ?? { cols: 80, rows: 24 });
      id = terminals.add(machine.account_id, machine.id, pty);
    } catch (err) {
      deps.logger.warn({ err, machineId: machine.id }, 'a terminal could not be opened');
      socket.resume();
      return socket.close(TERMINAL_CLOSE.failed, 'the machine’s terminal could not be opened');
    }
    // The page may have left while the PTY opened: it is then kept for the grace period, like any other.
    terminals.attach(id, socket, null);
  });
};
