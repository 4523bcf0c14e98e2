package main

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// connectPort relays one TCP connection to a port of the machine's loopback:
// the request's body goes to it, what it sends back is the response.
func (a *agent) connectPort(w http.ResponseWriter, r *http.Request, params []string) error {
	port, err := strconv.Atoi(params[0])
	if err != nil || port < 1 || port > 65535 {
		return invalid("the port must be from 1 to 65535, not %q", params[0])
	}
	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	conn, err := net.DialTimeout("tcp", address, 10*time.Second)
	if err != nil {
		return unreachable("nothing answers on port %d: %v", port, err)
	}
	defer conn.Close()

	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	go func() {
		io.Copy(conn, r.Body)
		// The client has said all it will: the port may still answer, as over TCP.
		conn.(*net.TCPConn).CloseWrite()
	}()
	go func() {
		<-r.Context().Done()
		conn.Close() // the client went away
	}()
	copyFlushing(w, conn)
	return nil
}
