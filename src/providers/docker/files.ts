import type { MachineFiles } from '../provider.ts';
import type { AgentConnections } from './agent-connection.ts';

/** A machine's files through its agent: one request each, the bytes streamed both ways. */
export function dockerFiles(agents: AgentConnections): MachineFiles {
  return {
    read: async (machine, path) => (await agents.of(machine.id)).read(path),
    list: async (machine, path) => (await agents.of(machine.id)).list(path),
    write: async (machine, path, content, append) => (await agents.of(machine.id)).write(path, content, append),
    remove: async (machine, path, recursive) => (await agents.of(machine.id)).remove(path, recursive),
  };
}
