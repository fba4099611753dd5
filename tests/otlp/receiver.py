"""A loopback OTLP/HTTP receiver for the export tests.

    receiver.py PORT_FILE OUT_DIR STATUS...

Listens on 127.0.0.1 (an ephemeral port, written to PORT_FILE once bound),
answers the Nth POST with the Nth STATUS (the last one repeats; a 503 or
429 carries `Retry-After: 1`), and saves each request as OUT_DIR/N.body
plus OUT_DIR/N.json (path, headers, status answered, arrival time).
"""

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

PORT_FILE, OUT_DIR, STATUSES = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
count = 0


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        status = STATUSES[min(count, len(STATUSES) - 1)]
        count += 1
        with open(os.path.join(OUT_DIR, f"{count}.body"), "wb") as f:
            f.write(body)
        meta = {
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "status": status,
            "time": time.time(),
        }
        with open(os.path.join(OUT_DIR, f"{count}.json"), "w", encoding="utf-8") as f:
            json.dump(meta, f)
        self.send_response(status)
        if status in (429, 503):
            self.send_header("Retry-After", "1")
        # An empty ExportTraceServiceResponse is an empty protobuf message.
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
tmp = PORT_FILE + ".tmp"
with open(tmp, "w", encoding="utf-8") as f:
    f.write(str(server.server_address[1]))
os.rename(tmp, PORT_FILE)
server.serve_forever()
