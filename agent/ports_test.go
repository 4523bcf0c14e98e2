package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
)

func TestPortRelaysToALocalServer(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	server, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	go func() {
		for {
			conn, err := server.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(conn, conn); conn.Close() }() // echo until the client half-closes
		}
	}()
	port := strconv.Itoa(server.Addr().(*net.TCPAddr).Port)

	input, inputWriter := io.Pipe()
	request, _ := http.NewRequest("POST", "http://agent/v1/ports/"+port+"/connect", input)
	response, err := ta.client.Do(request)
	if err != nil || response.StatusCode != 200 {
		t.Fatalf("connect: %v %v", response, err)
	}
	defer response.Body.Close()
	output := bufio.NewReader(response.Body)
	for _, line := range []string{"one\n", "two\n"} {
		io.WriteString(inputWriter, line)
		if echoed, err := output.ReadString('\n'); echoed != line {
			t.Fatalf("echoed %q: %v", echoed, err)
		}
	}
	inputWriter.Close()
	if rest, err := io.ReadAll(output); len(rest) != 0 || err != nil {
		t.Fatalf("after the close: %q %v", rest, err)
	}
}

func TestPortWithNothingListening(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	port := strconv.Itoa(closed.Addr().(*net.TCPAddr).Port)
	closed.Close()
	if code := ta.errorCode("POST", "/v1/ports/"+port+"/connect", nil, 502); code != "unreachable" {
		t.Fatal(code)
	}
	for _, bad := range []string{"0", "65536", "http"} {
		ta.errorCode("POST", "/v1/ports/"+bad+"/connect", nil, 400)
	}
}
