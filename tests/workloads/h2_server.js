// A loopback HTTP/2 (TLS, ALPN h2 only) server for the TLS-by-symbol test.
//
// Usage: node h2_server.js CERT KEY LOGDIR PORTFILE
// Listens on 127.0.0.1 (a free port, written to PORTFILE). For each request
// stream it writes what it got to LOGDIR/<path without "/">.json (method,
// path, authority, content-type) and .body (the body's bytes), and answers 200 with a
// text/event-stream body sent in two writes, whose exact bytes go to
// LOGDIR/<path>.response.
'use strict';
const fs = require('fs');
const http2 = require('http2');
const [cert, key, logdir, portfile] = process.argv.slice(2);
const server = http2.createSecureServer({
  cert: fs.readFileSync(cert),
  key: fs.readFileSync(key),
  allowHTTP1: false,
});
server.on('stream', (stream, headers) => {
  const chunks = [];
  stream.on('data', (c) => chunks.push(c));
  stream.on('end', () => {
    const name = headers[':path'].replace(/^\//, '');
    const body = Buffer.concat(chunks);
    fs.writeFileSync(`${logdir}/${name}.json`, JSON.stringify({
      method: headers[':method'],
      path: headers[':path'],
      authority: headers[':authority'],
      content_type: headers['content-type'] || null,
    }));
    fs.writeFileSync(`${logdir}/${name}.body`, body);
    const first = `data: {"stream":"${name}","part":1}\n\n`;
    const second = `data: {"stream":"${name}","part":2,"pad":"${'P'.repeat(2000)}"}\n\n`;
    fs.writeFileSync(`${logdir}/${name}.response`, first + second);
    stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
    stream.write(first);
    setTimeout(() => stream.end(second), 20);
  });
});
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(`${portfile}.tmp`, String(server.address().port));
  fs.renameSync(`${portfile}.tmp`, portfile);
});
