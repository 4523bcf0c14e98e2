import type { Readable } from 'node:stream';
import type { Deps } from '../deps.ts';
import { invalidRequest, notFound } from '../http/errors.ts';
import { newId } from '../shared/ids.ts';
import { toIso } from '../shared/clock.ts';
import { invalidState, notSupported, wrongStatus } from '../machines/machines.errors.ts';
import { toProviderMachine } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import type { FileEntry, MachineFiles, MachineProcesses, MachineProvider, ProcessInfo, ProcessOutput, ProcessSignal, ProviderMachine } from '../providers/provider.ts';

/**
 * A running machine's files and background processes, for the
 * owner's HTTP API and for the machine's own MCP tools: the machine must be
 * running and its provider must offer them; everything happens inside it.
 */

/** An upload is at most this large. */
export const FILE_WRITE_LIMIT = 100 * 1024 * 1024;
/** The MCP tools carry a file in their answer: at most this much of one. */
export const TOOL_FILE_LIMIT = 10 * 1024 * 1024;
/** How long a read of a process's output may wait for more. */
export const OUTPUT_WAIT_LIMIT_MS = 30_000;

export interface FileEntryView {
  name: string;
  type: FileEntry['type'];
  size: number;
  modifiedAt: string;
}

export type FileView = { type: 'file'; size: number; content: Readable } | { type: 'directory'; path: string; entries: FileEntryView[] };

export interface ProcessView {
  id: string;
  command: string;
  pid: number;
  status: ProcessInfo['status'];
  exitCode: number | null;
  endReason: ProcessInfo['endReason'];
  startedAt: string;
}

const toProcessView = (process: ProcessInfo): ProcessView => ({ ...process, startedAt: toIso(process.startedAt) });

/**
 * The machine, running, and what its provider offers.
 * @throws AppError 404 unknown machine, 409 invalid_state when not running, 409 not_supported without the capability.
 */
async function runningWith<Capability>(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, capability: Capability | undefined, what: string): Promise<{ machine: ProviderMachine; capability: Capability }> {
  const row = await getMachineRow(deps, accountId, machineId);
  if (capability === undefined) throw notSupported(what, provider.name);
  if (row.status !== 'running') throw wrongStatus(`give access to its ${what}`, row.status);
  return { machine: toProviderMachine(row), capability };
}

const files = (deps: Deps, provider: MachineProvider, accountId: string, machineId: string) =>
  runningWith<MachineFiles>(deps, provider, accountId, machineId, provider.files, 'files');
const processes = (deps: Deps, provider: MachineProvider, accountId: string, machineId: string) =>
  runningWith<MachineProcesses>(deps, provider, accountId, machineId, provider.processes, 'processes');

/** @throws AppError 404 for a path that does not exist (and as runningWith). */
export async function readPath(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, path: string): Promise<FileView> {
  const { machine, capability } = await files(deps, provider, accountId, machineId);
  const found = await capability.read(machine, path);
  if (found === null) throw notFound(`The path ${path}`);
  if (found.type === 'file') return found;
  if (found.type === 'other') throw invalidRequest(`${path} is neither a file nor a directory.`);
  const entries = await capability.list(machine, path);
  if (entries === null) throw notFound(`The directory ${path}`);
  return { type: 'directory', path, entries: entries.map((entry) => ({ ...entry, modifiedAt: toIso(entry.modifiedAt) })) };
}

/** A directory's entries. @throws AppError 400 when the path is not a directory, 404 when it does not exist. */
export async function listDirectory(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, path: string): Promise<{ path: string; entries: FileEntryView[] }> {
  const found = await readPath(deps, provider, accountId, machineId, path);
  if (found.type === 'file') {
    found.content.destroy();
    throw invalidRequest(`${path} is a file, not a directory.`);
  }
  return found;
}

/** @throws AppError 400 when the file cannot be written there (a directory in the way), and as runningWith. */
export async function writeFile(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, path: string, content: Buffer, append = false): Promise<void> {
  const { machine, capability } = await files(deps, provider, accountId, machineId);
  const failure = await capability.write(machine, path, content, append);
  if (failure !== null) throw invalidRequest(`${path} could not be written: ${failure}.`);
}

/** @throws AppError 404 for a missing path, 409 invalid_state for a directory without `recursive`. */
export async function deletePath(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, path: string, recursive: boolean): Promise<void> {
  const { machine, capability } = await files(deps, provider, accountId, machineId);
  const outcome = await capability.remove(machine, path, recursive);
  if (outcome === 'missing') throw notFound(`The path ${path}`);
  if (outcome === 'directory') throw invalidState(`${path} is a directory: delete it with recursive=true, and everything in it goes too.`);
}

export interface NewProcess {
  command: string;
  cwd?: string;
  env?: Record<string, string>;
}

export async function startProcess(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, input: NewProcess): Promise<ProcessView> {
  const { machine, capability } = await processes(deps, provider, accountId, machineId);
  const now = deps.clock.now();
  return toProcessView(await capability.start(machine, { id: newId('proc', now), command: input.command, cwd: input.cwd ?? null, env: input.env ?? {}, startedAt: now }));
}

export async function listProcesses(deps: Deps, provider: MachineProvider, accountId: string, machineId: string): Promise<ProcessView[]> {
  const { machine, capability } = await processes(deps, provider, accountId, machineId);
  return (await capability.list(machine)).map(toProcessView);
}

/** @throws AppError 404 for an unknown process. */
export async function getProcess(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, processId: string): Promise<ProcessView> {
  const found = (await listProcesses(deps, provider, accountId, machineId)).find((process) => process.id === processId);
  if (found === undefined) throw notFound('The process');
  return found;
}

/** @throws AppError 404 for an unknown process. */
export async function readProcessOutput(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, processId: string, offset: number, waitMs: number): Promise<ProcessOutput> {
  const { machine, capability } = await processes(deps, provider, accountId, machineId);
  const output = await capability.output(machine, processId, offset, Math.min(waitMs, OUTPUT_WAIT_LIMIT_MS));
  if (output === null) throw notFound('The process');
  return output;
}

/** @throws AppError 404 unknown, 409 invalid_state when it no longer runs. */
export async function sendProcessInput(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, processId: string, data: string): Promise<void> {
  const { machine, capability } = await processes(deps, provider, accountId, machineId);
  if (!(await capability.input(machine, processId, Buffer.from(data, 'utf8')))) await notRunning(deps, provider, accountId, machineId, processId);
}

/** @throws AppError 404 unknown, 409 invalid_state when it no longer runs. */
export async function signalProcess(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, processId: string, signal: ProcessSignal): Promise<void> {
  const { machine, capability } = await processes(deps, provider, accountId, machineId);
  if (!(await capability.signal(machine, processId, signal))) await notRunning(deps, provider, accountId, machineId, processId);
}

/** Why a process refused: unknown (404), or ended (409). */
async function notRunning(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, processId: string): Promise<never> {
  const process = await getProcess(deps, provider, accountId, machineId, processId);
  throw invalidState(`The process has ${process.exitCode === null ? 'ended' : `exited with code ${process.exitCode}`}; it takes no input or signal.`);
}
