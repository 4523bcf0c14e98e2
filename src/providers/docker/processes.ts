import type { MachineProcesses } from '../provider.ts';
import type { AgentConnections } from './agent-connection.ts';

/**
 * A machine's background processes through its agent, which supervises them
 * and records them on the machine's disk (agent/API.md): they outlive the
 * service, not the machine's stop. Output reads wait in the agent, which is
 * told of new output the moment it is written.
 */
export function dockerProcesses(agents: AgentConnections): MachineProcesses {
  return {
    start: async (machine, process) => (await agents.of(machine.id)).startProcess(process),
    list: async (machine) => (await agents.of(machine.id)).listProcesses(),
    output: async (machine, id, offset, waitMs) => (await agents.of(machine.id)).processOutput(id, offset, waitMs),
    input: async (machine, id, data) => (await agents.of(machine.id)).processInput(id, data),
    signal: async (machine, id, signal) => (await agents.of(machine.id)).processSignal(id, signal),
  };
}
