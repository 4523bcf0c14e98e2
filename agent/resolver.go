// `agent resolver`: the machines' resolver (CONTRACT 20), one process per
// engine host, on the host's network, listening on the machines' egress
// gateway. It forwards the machines' questions to the upstream nameservers,
// answering by the asking machine's policy (known by its source address):
// a name its policy does not allow is refused, and the addresses answered
// for an allowed domain are added to that machine's firewall chain before
// the answer goes back, so the connection that follows is let through.
// The service sets policies through a Unix socket (`agent resolver-policy`,
// run by an engine exec in the resolver's container).
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const (
	defaultResolverSocket = "/run/machine-platform/resolver.sock"
	defaultResolverState  = "/var/lib/machine-platform/resolver-policies.json"
	// The chain (made by the service's firewall, filled here) that sends each machine to its own.
	dispatchChain   = "MP-MACHINES"
	upstreamTimeout = 2 * time.Second
)

// firewall applies what resolver decides; the real one runs iptables-restore.
type firewall interface {
	apply(input string) error
	removeChain(chain string) error
}

// policyRequest is one line on the control socket.
type policyRequest struct {
	// "set" or "forget".
	Op      string     `json:"op"`
	Address string     `json:"address"`
	Machine string     `json:"machine"`
	Policy  *netPolicy `json:"policy,omitempty"`
}

type resolver struct {
	mu       sync.Mutex
	machines map[string]*machineEntry
	// Kept so that a restarted resolver knows them (the kernel's chains outlive it).
	policies  map[string]policyRequest
	firewall  firewall
	upstream  []string
	now       func() time.Time
	statePath string
	// Machines the resolver has no policy of (just started, say): the service's default.
	defaultInternet bool
}

func newResolver(fw firewall, upstream []string, statePath string, defaultInternet bool) *resolver {
	return &resolver{machines: map[string]*machineEntry{}, policies: map[string]policyRequest{}, firewall: fw, upstream: upstream, now: time.Now, statePath: statePath, defaultInternet: defaultInternet}
}

// addresses of the known machines, sorted (the dispatch chain's order does not matter, but a stable one reads better).
func (r *resolver) addresses() []string {
	out := make([]string, 0, len(r.machines))
	for a := range r.machines {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// setPolicy replaces a machine's policy and its chain; the addresses answered
// before are kept only for domains the new policy still allows... which the
// resolver cannot tell by address, so they are dropped: the machine's next
// lookup adds them again.
func (r *resolver) setPolicy(req policyRequest) error {
	if net.ParseIP(req.Address).To4() == nil {
		return fmt.Errorf("address %q is not IPv4", req.Address)
	}
	switch req.Op {
	case "set":
		if req.Policy == nil {
			return errors.New("set needs a policy")
		}
		compiled, err := compilePolicy(*req.Policy)
		if err != nil {
			return err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		previous := r.machines[req.Address]
		entry := &machineEntry{machine: req.Machine, policy: compiled, answered: map[string]time.Time{}}
		r.machines[req.Address] = entry
		if err := r.firewall.apply(restoreInput(dispatchChain, r.addresses(), req.Address, entry.rules(r.now()))); err != nil {
			if previous == nil {
				delete(r.machines, req.Address)
			} else {
				r.machines[req.Address] = previous
			}
			return err
		}
		r.policies[req.Address] = req
		r.saveLocked()
		return nil
	case "forget":
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.machines, req.Address)
		delete(r.policies, req.Address)
		if err := r.firewall.apply("*filter\n" + dispatchRules(dispatchChain, r.addresses()) + "COMMIT\n"); err != nil {
			return err
		}
		r.saveLocked()
		return r.firewall.removeChain(chainOf(req.Address))
	default:
		return fmt.Errorf("unknown op %q", req.Op)
	}
}

func (r *resolver) saveLocked() {
	if r.statePath == "" {
		return
	}
	list := make([]policyRequest, 0, len(r.policies))
	for _, a := range r.addresses() {
		if p, ok := r.policies[a]; ok {
			list = append(list, p)
		}
	}
	data, _ := json.Marshal(list)
	os.MkdirAll(filepath.Dir(r.statePath), 0o700)
	tmp := r.statePath + ".tmp"
	if os.WriteFile(tmp, data, 0o600) == nil {
		os.Rename(tmp, r.statePath)
	}
}

// loadState sets again the policies a previous run of the resolver kept.
func (r *resolver) loadState() {
	data, err := os.ReadFile(r.statePath)
	if err != nil {
		return
	}
	var list []policyRequest
	if json.Unmarshal(data, &list) != nil {
		return
	}
	for _, req := range list {
		if err := r.setPolicy(req); err != nil {
			log.Printf("the kept policy of %s: %v", req.Address, err)
		}
	}
}

// decision is what the resolver does with a question.
type decision int

const (
	forward decision = iota
	refuse
	noSuchName
)

// decide answers locally what must never leave: names without a dot (other
// containers' names) and reverse lookups of private addresses, which tell of
// the host's networks; then the asking machine's policy.
func (r *resolver) decide(source string, name string, qtype dnsmessage.Type) decision {
	lower := strings.TrimSuffix(strings.ToLower(name), ".")
	if !strings.Contains(lower, ".") {
		return noSuchName
	}
	if qtype == dnsmessage.TypePTR && privateReverse(lower) {
		return noSuchName
	}
	r.mu.Lock()
	entry := r.machines[source]
	r.mu.Unlock()
	if entry == nil {
		if r.defaultInternet {
			return forward
		}
		return refuse
	}
	if entry.policy.nameAllowed(lower) {
		return forward
	}
	return refuse
}

// privateReverse: a PTR name of 10/8, 172.16/12, 192.168/16, 127/8 or 169.254/16.
func privateReverse(name string) bool {
	if !strings.HasSuffix(name, ".in-addr.arpa") {
		return false
	}
	parts := strings.Split(strings.TrimSuffix(name, ".in-addr.arpa"), ".")
	if len(parts) == 0 {
		return false
	}
	// Reversed: the first octet is last.
	octet := func(i int) string {
		if i < len(parts) {
			return parts[len(parts)-1-i]
		}
		return ""
	}
	switch octet(0) {
	case "10", "127":
		return true
	case "192":
		return octet(1) == "168"
	case "169":
		return octet(1) == "254"
	case "172":
		var second int
		fmt.Sscanf(octet(1), "%d", &second)
		return second >= 16 && second <= 31
	}
	return false
}

// learn adds the A records of an answer for an allowed domain to the asking
// machine's chain, before the answer is given: the connection that follows
// must find its rule there.
func (r *resolver) learn(source string, name string, answer []byte) error {
	var parser dnsmessage.Parser
	header, err := parser.Start(answer)
	if err != nil || header.RCode != dnsmessage.RCodeSuccess {
		return nil
	}
	if err := parser.SkipAllQuestions(); err != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	entry := r.machines[source]
	if entry == nil || !entry.policy.domainAllowed(name) || entry.policy.internet {
		return nil
	}
	now := r.now()
	changed := false
	for {
		h, err := parser.AnswerHeader()
		if err != nil {
			break
		}
		if h.Type != dnsmessage.TypeA {
			parser.SkipAnswer()
			continue
		}
		a, err := parser.AResource()
		if err != nil {
			break
		}
		address := net.IP(a.A[:]).String()
		hold := time.Duration(h.TTL) * time.Second
		if hold < minAddressHold {
			hold = minAddressHold
		}
		until := now.Add(hold)
		if previous, ok := entry.answered[address]; !ok || previous.Before(now) {
			changed = true
		}
		if previous := entry.answered[address]; until.After(previous) {
			entry.answered[address] = until
		}
	}
	if !changed {
		return nil
	}
	return r.firewall.apply(restoreInput(dispatchChain, r.addresses(), source, entry.rules(now)))
}

// prune takes out the addresses whose hold has passed.
func (r *resolver) prune() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for address, entry := range r.machines {
		changed := false
		for a, until := range entry.answered {
			if !until.After(now) {
				delete(entry.answered, a)
				changed = true
			}
		}
		if changed {
			if err := r.firewall.apply(restoreInput(dispatchChain, r.addresses(), address, entry.rules(now))); err != nil {
				log.Printf("pruning %s: %v", address, err)
			}
		}
	}
}

// answerQuery answers one question from a machine (the raw message), by
// forwarding it or locally; nil means no answer (a message it cannot read).
func (r *resolver) answerQuery(source string, query []byte, exchange func([]byte) ([]byte, error)) []byte {
	var parser dnsmessage.Parser
	header, err := parser.Start(query)
	if err != nil {
		return nil
	}
	question, err := parser.Question()
	if err != nil {
		return nil
	}
	name := question.Name.String()
	switch r.decide(source, name, question.Type) {
	case refuse:
		return reply(header, question, dnsmessage.RCodeRefused)
	case noSuchName:
		return reply(header, question, dnsmessage.RCodeNameError)
	}
	answer, err := exchange(query)
	if err != nil {
		return reply(header, question, dnsmessage.RCodeServerFailure)
	}
	if err := r.learn(source, name, answer); err != nil {
		// The rule could not be set: the machine could not connect anyway; say so rather than answer.
		log.Printf("allowing the addresses of %s for %s: %v", name, source, err)
		return reply(header, question, dnsmessage.RCodeServerFailure)
	}
	return answer
}

func reply(query dnsmessage.Header, question dnsmessage.Question, code dnsmessage.RCode) []byte {
	message := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: query.ID, Response: true, OpCode: query.OpCode, RecursionDesired: query.RecursionDesired, RecursionAvailable: true, RCode: code},
		Questions: []dnsmessage.Question{question},
	}
	out, err := message.Pack()
	if err != nil {
		return nil
	}
	return out
}

// exchangeUDP asks the upstream servers in turn, over UDP.
func exchangeUDP(upstream []string) func([]byte) ([]byte, error) {
	return func(query []byte) ([]byte, error) {
		var last error = errors.New("no upstream nameserver")
		for _, server := range upstream {
			conn, err := net.DialTimeout("udp", hostPort(server), upstreamTimeout)
			if err != nil {
				last = err
				continue
			}
			conn.SetDeadline(time.Now().Add(upstreamTimeout))
			if _, err = conn.Write(query); err == nil {
				buf := make([]byte, 65535)
				var n int
				if n, err = conn.Read(buf); err == nil {
					conn.Close()
					return buf[:n], nil
				}
			}
			conn.Close()
			last = err
		}
		return nil, last
	}
}

// exchangeTCP asks over TCP (a machine that got a truncated answer asks again so).
func exchangeTCP(upstream []string) func([]byte) ([]byte, error) {
	return func(query []byte) ([]byte, error) {
		var last error = errors.New("no upstream nameserver")
		for _, server := range upstream {
			conn, err := net.DialTimeout("tcp", hostPort(server), upstreamTimeout)
			if err != nil {
				last = err
				continue
			}
			conn.SetDeadline(time.Now().Add(upstreamTimeout))
			answer, err := tcpExchange(conn, query)
			conn.Close()
			if err == nil {
				return answer, nil
			}
			last = err
		}
		return nil, last
	}
}

func tcpExchange(conn net.Conn, query []byte) ([]byte, error) {
	if err := writeTCPMessage(conn, query); err != nil {
		return nil, err
	}
	return readTCPMessage(conn)
}

func writeTCPMessage(w io.Writer, message []byte) error {
	framed := make([]byte, 2+len(message))
	binary.BigEndian.PutUint16(framed, uint16(len(message)))
	copy(framed[2:], message)
	_, err := w.Write(framed)
	return err
}

func readTCPMessage(r io.Reader) ([]byte, error) {
	var size [2]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	message := make([]byte, binary.BigEndian.Uint16(size[:]))
	_, err := io.ReadFull(r, message)
	return message, err
}

func hostPort(server string) string {
	if _, _, err := net.SplitHostPort(server); err == nil {
		return server
	}
	return net.JoinHostPort(server, "53")
}

func (r *resolver) serveUDP(conn net.PacketConn) {
	exchange := exchangeUDP(r.upstream)
	buf := make([]byte, 65535)
	for {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		query := append([]byte(nil), buf[:n]...)
		go func() {
			source := peer.(*net.UDPAddr).IP.String()
			if answer := r.answerQuery(source, query, exchange); answer != nil {
				conn.WriteTo(answer, peer)
			}
		}()
	}
}

func (r *resolver) serveTCP(listener net.Listener) {
	exchange := exchangeTCP(r.upstream)
	for {
		conn, err := listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go func() {
			defer conn.Close()
			source := conn.RemoteAddr().(*net.TCPAddr).IP.String()
			for {
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				query, err := readTCPMessage(conn)
				if err != nil {
					return
				}
				answer := r.answerQuery(source, query, exchange)
				if answer == nil || writeTCPMessage(conn, answer) != nil {
					return
				}
			}
		}()
	}
}

// serveControl takes one JSON request per connection and answers `ok` or the error.
func (r *resolver) serveControl(listener net.Listener) {
	for {
		conn, err := listener.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(conn).ReadBytes('\n')
			if err != nil && len(line) == 0 {
				return
			}
			var req policyRequest
			if err := json.Unmarshal(line, &req); err != nil {
				fmt.Fprintf(conn, "error: %v\n", err)
				return
			}
			if err := r.setPolicy(req); err != nil {
				fmt.Fprintf(conn, "error: %v\n", err)
				return
			}
			fmt.Fprintln(conn, "ok")
		}()
	}
}

// upstreamFromResolvConf reads the nameservers of the host (the resolver runs on its network).
func upstreamFromResolvConf(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var servers []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "nameserver" {
			servers = append(servers, fields[1])
		}
	}
	return servers
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func resolverCommand(args []string) int {
	flags := flag.NewFlagSet("resolver", flag.ContinueOnError)
	listen := flags.String("listen", "", "the address to answer on (port 53, UDP and TCP)")
	socket := flags.String("socket", defaultResolverSocket, "the control socket")
	state := flags.String("state", defaultResolverState, "where the policies are kept across restarts")
	defaultInternet := flags.Bool("default-internet", true, "whether a machine with no policy set may resolve every name")
	var upstream stringList
	flags.Var(&upstream, "upstream", "an upstream nameserver (repeatable); none: those of /etc/resolv.conf")
	if flags.Parse(args) != nil || *listen == "" {
		fmt.Fprintln(os.Stderr, "usage: agent resolver --listen ADDRESS [--upstream ADDRESS]... [--socket PATH] [--state PATH]")
		return 2
	}
	log.SetPrefix("machine-resolver: ")
	if len(upstream) == 0 {
		upstream = upstreamFromResolvConf("/etc/resolv.conf")
	}
	r := newResolver(iptablesFirewall{}, upstream, *state, *defaultInternet)
	r.loadState()
	udp, err := net.ListenPacket("udp4", net.JoinHostPort(*listen, "53"))
	if err != nil {
		log.Print(err)
		return 1
	}
	tcp, err := net.Listen("tcp4", net.JoinHostPort(*listen, "53"))
	if err != nil {
		log.Print(err)
		return 1
	}
	control, err := listenUnix(*socket)
	if err != nil {
		log.Print(err)
		return 1
	}
	go r.serveUDP(udp)
	go r.serveTCP(tcp)
	go r.serveControl(control)
	for range time.Tick(30 * time.Second) {
		r.prune()
	}
	return 0
}

// resolverPolicyCommand sends one request (its JSON, the argument) to the resolver; exit 0 when applied.
func resolverPolicyCommand(args []string) int {
	flags := flag.NewFlagSet("resolver-policy", flag.ContinueOnError)
	socket := flags.String("socket", defaultResolverSocket, "the resolver's control socket")
	if flags.Parse(args) != nil || flags.NArg() != 1 {
		fmt.Fprintln(os.Stderr, `usage: agent resolver-policy [--socket PATH] '{"op":"set","address":…,"policy":{…}}'`)
		return 2
	}
	conn, err := dialAgent(*socket, 5*time.Second)
	if err != nil {
		fmt.Fprintf(os.Stderr, "no resolver answers on %s: %v\n", *socket, err)
		return 3
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintln(conn, strings.TrimSpace(flags.Arg(0)))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if strings.TrimSpace(line) != "ok" {
		fmt.Fprintln(os.Stderr, strings.TrimSpace(line))
		return 1
	}
	return 0
}
