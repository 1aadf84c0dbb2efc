// The far end of the http handler's benchmark (bench/http.sh): answers every POST with
// 204 at once, HTTP/1.1 keep-alive, and counts requests and the TCP connections they
// came on, so the benchmark can say how many connections a run opened per job.
//
//   node bench/http_sink.js PORT_FILE
//
// Listens on 127.0.0.1, an ephemeral port, written to PORT_FILE once listening. GET
// /stats answers {"requests": N, "connections": M}: the job requests (any other POST) and
// the connections they came on; POST /reset zeroes both. Node's default keep-alive
// timeout (5 s) applies, as with most application servers.
'use strict';
const fs = require('fs');
const http = require('http');

let requests = 0;
let connections = 0;
let generation = 0;  // a connection counted before the last reset counts again

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ requests, connections }));
    return;
  }
  if (req.method === 'POST' && req.url === '/reset') {
    requests = 0;
    connections = 0;
    generation += 1;
    res.statusCode = 204;
    res.end();
    return;
  }
  if (req.socket.countedIn !== generation) {
    req.socket.countedIn = generation;
    connections += 1;
  }
  req.resume();  // read and drop the payload
  req.on('end', () => {
    requests += 1;
    res.statusCode = 204;
    res.end();
  });
});
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(process.argv[2], String(server.address().port));
});
process.on('SIGTERM', () => process.exit(0));
