/**
 * The machine's app: a page with its own CORS headers, a 100 MB download and
 * a WebSocket echo, with Python's standard library only (the default image
 * has python3).
 */
export const MACHINE_APP = String.raw`
import base64, hashlib, http.server, struct, sys

class App(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *args): pass

    def do_GET(self):
        if self.path == '/ws':
            return self.echo()
        if self.path.startswith('/big'):
            size = int(self.path.split('=')[1]) if '=' in self.path else 100 * 1024 * 1024
            self.send_response(200)
            self.send_header('Content-Type', 'application/octet-stream')
            self.send_header('Content-Length', str(size))
            self.end_headers()
            chunk = b'\x07' * 65536
            sent = 0
            while sent < size:
                part = chunk[:min(len(chunk), size - sent)]
                self.wfile.write(part)
                sent += len(part)
            return
        body = ('<h1>hello from the machine at ' + self.path + '</h1>').encode()
        self.send_response(200)
        self.send_header('Content-Type', 'text/html; charset=utf-8')
        self.send_header('Access-Control-Allow-Origin', 'https://app.example')
        self.send_header('Access-Control-Expose-Headers', 'X-Custom')
        self.send_header('X-Custom', 'kept')
        self.send_header('X-Saw-Token', str(self.headers.get('X-Preview-Token')))
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def echo(self):
        key = self.headers['Sec-WebSocket-Key']
        accept = base64.b64encode(hashlib.sha1((key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').encode()).digest()).decode()
        self.send_response(101)
        self.send_header('Upgrade', 'websocket')
        self.send_header('Connection', 'Upgrade')
        self.send_header('Sec-WebSocket-Accept', accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, size = head[0] & 15, head[1] & 127
            if size == 126:
                size = struct.unpack('>H', self.rfile.read(2))[0]
            elif size == 127:
                size = struct.unpack('>Q', self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 128 else b'\0\0\0\0'
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(size)))
            if opcode == 8:
                self.wfile.write(b'\x88\x00')
                return
            length = bytes([size]) if size < 126 else b'\x7e' + struct.pack('>H', size)
            self.wfile.write(bytes([0x80 | opcode]) + length + data)
            self.wfile.flush()

http.server.ThreadingHTTPServer(('0.0.0.0', int(sys.argv[1])), App).serve_forever()
`;
