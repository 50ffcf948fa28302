"""Socket helpers for the watchdog tests: connect, and read what a peer sends until it closes."""
import socket
import time


def connect(addr):
    return socket.create_connection(addr, timeout=5)


def drain(s, limit=5.0):
    """Everything the peer sends until it closes (at most ``limit`` s); b'...<open>' if it did not."""
    got, end = b"", time.time() + limit
    while time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        try:
            data = s.recv(4096)
        except socket.timeout:
            break
        except OSError:
            return got
        if not data:
            return got
        got += data
    return got + b"<open>"
