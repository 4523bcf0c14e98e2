import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { responses } from '../http/schemas.ts';
import {
  deletePath,
  FILE_WRITE_LIMIT,
  getProcess,
  listProcesses,
  readPath,
  readProcessOutput,
  sendProcessInput,
  signalProcess,
  startProcess,
  writeFile,
} from './machine-access.service.ts';
import {
  DeleteFileQuery,
  DirectorySchema,
  MachineParams,
  PathQuery,
  ProcessInputBody,
  ProcessOutputQuery,
  ProcessOutputSchema,
  ProcessParams,
  ProcessSchema,
  ProcessSignalBody,
  StartProcessBody,
} from './machine-access.schemas.ts';

const filesTags = ['machine files'];
const processesTags = ['machine processes'];

/**
 * A running machine's files and background processes, for its owner (API key
 * or session). The machine's own MCP endpoint offers the same as
 * tools (machine-tools.ts).
 */
export const machineAccessRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;

  app.get('/api/machines/:id/files', {
    schema: {
      tags: filesTags,
      summary: "A file's bytes (application/octet-stream), or a directory's entries (JSON)",
      params: MachineParams,
      querystring: PathQuery,
      response: responses({ 200: DirectorySchema }),
    },
  }, async (request, reply) => {
    const found = await readPath(deps, provider, accountIdOf(request), request.params.id, request.query.path);
    if (found.type === 'directory') return { path: found.path, entries: found.entries };
    // Bytes, streamed as the machine sends them: the response schema describes the directory's JSON only.
    const name = request.query.path.split('/').pop() || 'file';
    return reply
      .type('application/octet-stream')
      .headers({ 'content-length': found.size, 'cache-control': 'no-store', 'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(name)}` })
      .send(found.content as never);
  });

  app.delete('/api/machines/:id/files', {
    schema: {
      tags: filesTags,
      summary: 'Delete a file (or a directory with recursive=true)',
      params: MachineParams,
      querystring: DeleteFileQuery,
    },
  }, async (request, reply) => {
    await deletePath(deps, provider, accountIdOf(request), request.params.id, request.query.path, request.query.recursive ?? false);
    return reply.code(204).send(null);
  });

  await app.register(fileUploads);

  app.post('/api/machines/:id/processes', {
    schema: {
      tags: processesTags,
      summary: 'Start a background process (/bin/sh -c, as root): it runs until it ends or the machine stops',
      params: MachineParams,
      body: StartProcessBody,
      response: responses({ 201: ProcessSchema }),
    },
  }, async (request, reply) => reply.code(201).send(await startProcess(deps, provider, accountIdOf(request), request.params.id, request.body)));

  app.get('/api/machines/:id/processes', {
    schema: { tags: processesTags, summary: "The machine's background processes, oldest first", params: MachineParams, response: responses({ 200: Type.Object({ data: Type.Array(ProcessSchema), nextCursor: Type.Null() }) }) },
  }, async (request) => ({ data: await listProcesses(deps, provider, accountIdOf(request), request.params.id), nextCursor: null }));

  app.get('/api/machines/:id/processes/:procId', {
    schema: { tags: processesTags, summary: 'One background process', params: ProcessParams, response: responses({ 200: ProcessSchema }) },
  }, async (request) => getProcess(deps, provider, accountIdOf(request), request.params.id, request.params.procId));

  app.get('/api/machines/:id/processes/:procId/output', {
    schema: {
      tags: processesTags,
      summary: "A process's output from an offset on (at most 1 MiB a read), waiting up to waitMs for more",
      params: ProcessParams,
      querystring: ProcessOutputQuery,
      response: responses({ 200: ProcessOutputSchema }),
    },
  }, async (request) => readProcessOutput(deps, provider, accountIdOf(request), request.params.id, request.params.procId, request.query.offset ?? 0, request.query.waitMs ?? 0));

  app.post('/api/machines/:id/processes/:procId/input', {
    schema: { tags: processesTags, summary: "Write to a running process's stdin", params: ProcessParams, body: ProcessInputBody },
  }, async (request, reply) => {
    await sendProcessInput(deps, provider, accountIdOf(request), request.params.id, request.params.procId, request.body.data);
    return reply.code(204).send(null);
  });

  app.post('/api/machines/:id/processes/:procId/signal', {
    schema: { tags: processesTags, summary: 'Send a signal to a running process and everything it started', params: ProcessParams, body: ProcessSignalBody },
  }, async (request, reply) => {
    await signalProcess(deps, provider, accountIdOf(request), request.params.id, request.params.procId, request.body.signal);
    return reply.code(204).send(null);
  });
};

/** Uploads: the raw body, whatever its type (a .json file is bytes here, not JSON), up to FILE_WRITE_LIMIT. */
const fileUploads: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: FILE_WRITE_LIMIT }, (_request, body, done) => done(null, body));

  app.put('/api/machines/:id/files', {
    bodyLimit: FILE_WRITE_LIMIT,
    schema: {
      tags: filesTags,
      summary: 'Write a file from the raw body (at most 100 MiB), creating its parent directories',
      params: MachineParams,
      querystring: PathQuery,
    },
  }, async (request, reply) => {
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    await writeFile(deps, provider, accountIdOf(request), request.params.id, request.query.path, body);
    return reply.code(204).send(null);
  });
};
