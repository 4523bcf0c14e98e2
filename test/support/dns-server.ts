import { createSocket } from 'node:dgram';
import dnsPacket from 'dns-packet';

/** How the nameserver treats a name: its A records and their TTL, no such name, or silence (it never answers). */
export type DnsAnswer = { a: string[]; ttl: number } | 'nxdomain' | 'silent';

export interface DnsServer {
  /** `127.0.0.1:<port>`, for `Resolver.setServers`. */
  address: string;
  /** Every question received, as `<type> <name>`. */
  questions: string[];
  close(): Promise<void>;
}

/** A real nameserver over UDP (on 127.0.0.1 and a free port unless told), answering from `answer(name)`; AAAA questions get no records. */
export async function startDnsServer(answer: (name: string) => DnsAnswer, listen: { host?: string; port?: number } = {}): Promise<DnsServer> {
  const host = listen.host ?? '127.0.0.1';
  const socket = createSocket('udp4');
  const questions: string[] = [];
  socket.on('message', (message, peer) => {
    const query = dnsPacket.decode(message);
    const question = query.questions?.[0];
    if (question === undefined) return;
    questions.push(`${question.type} ${question.name}`);
    const decision = answer(question.name);
    if (decision === 'silent') return;
    const records = decision !== 'nxdomain' && question.type === 'A'
      ? decision.a.map((data) => ({ type: 'A' as const, name: question.name, ttl: decision.ttl, data }))
      : [];
    const response = dnsPacket.encode({
      type: 'response',
      id: query.id,
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | (decision === 'nxdomain' ? 3 : 0),
      questions: [question],
      answers: records,
    });
    socket.send(response, peer.port, peer.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(listen.port ?? 0, host, () => resolve());
  });
  return {
    address: `${host}:${socket.address().port}`,
    questions,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
