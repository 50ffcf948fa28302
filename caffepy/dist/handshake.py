"""The watchdog's handshake: how a rank and the job's watchdog prove to each other that they know
the job's secret before anything either says counts (caffepy.dist.watchdog, docs/security.md).

Each rank keeps one TCP connection to the watchdog. Lines end in
``\n`` and hold at most ``LINE_MAX`` bytes::

    watchdog -> peer:  CHALLENGE <nonce>              (on accept: 32 random bytes, hex)
    rank -> watchdog:  HELLO <rank> <cnonce> <mac>    mac = HMAC-SHA256(secret, "caffepy-watchdog-1|
                                                        rank|<rank>|<nonce>|<cnonce>")
    watchdog -> rank:  WELCOME <mac>                  mac = HMAC-SHA256(secret, "caffepy-watchdog-1|
                                                        watchdog|<rank>|<cnonce>|<nonce>")
    then rank -> watchdog:  BEAT every heartbeat_interval s; BYE when its roles are done; QUIT
                            (rank 0) when the coordinator ends the job itself
         watchdog -> rank:  BEAT every heartbeat_interval s; STOP when the job must stop

Nothing a connection says counts before its HELLO proved the secret (:func:`proof`, compared with
``hmac.compare_digest``); the rank checks the WELCOME the same way (a process that is not the
job's watchdog cannot stop it). A connection that has not authenticated within
``HANDSHAKE_TIMEOUT`` s, sends a line over ``LINE_MAX`` bytes, a malformed line or a wrong proof is
closed; at most ``MAX_PENDING`` connections wait to authenticate at once (more are closed on
accept). Each kind of refusal is logged once per peer address (one WARNING line, at most
``WARN_MAX`` in all); no connection's input or error ends the watchdog. Only an authenticated
connection's loss is a rank's death, only its BYE / QUIT count.
"""
import hashlib
import hmac
import secrets
import socket
import time

PROTOCOL = b"caffepy-watchdog-1"
SECRET_BYTES = 32
NONCE_BYTES = 32
LINE_MAX = 256            # bytes in one line, its newline included
HANDSHAKE_TIMEOUT = 5.0   # s a connection has to authenticate
MAX_PENDING = 64          # connections waiting to authenticate at once
WARN_MAX = 100            # refusal warnings in all (then one line says the rest are not logged)


class HandshakeError(Exception):
    """A peer did not prove that it knows the job's secret (or broke the protocol)."""


def new_secret():
    return secrets.token_bytes(SECRET_BYTES)


def proof(secret, role, rank, nonce, other):
    """HMAC-SHA256(secret, PROTOCOL|role|rank|nonce|other), hex (bytes): ``role`` b"rank" answers
    the watchdog's ``nonce``; b"watchdog" answers the rank's."""
    msg = b"|".join([PROTOCOL, role, b"%d" % rank, nonce, other])
    return hmac.new(secret, msg, hashlib.sha256).hexdigest().encode()


def _is_hex(b, n):
    return len(b) == n and all(c in b"0123456789abcdef" for c in b)


def check_hello(secret, line, nonce, ranks):
    """The rank a ``HELLO`` line proves (its client nonce too); HandshakeError(kind) otherwise."""
    parts = line.split()
    if len(parts) != 4 or parts[0] != b"HELLO":
        raise HandshakeError("malformed")
    _, rank, cnonce, mac = parts
    if not (rank.isdigit() and len(rank) <= 9) or int(rank) not in ranks:
        raise HandshakeError("malformed")
    if not _is_hex(cnonce, 2 * NONCE_BYTES) or not _is_hex(mac, 64):
        raise HandshakeError("malformed")
    if not hmac.compare_digest(mac, proof(secret, b"rank", int(rank), nonce, cnonce)):
        raise HandshakeError("wrong proof")
    return int(rank), cnonce


def _read_line(sock, deadline, buf=b""):
    while b"\n" not in buf:
        if len(buf) >= LINE_MAX:
            raise HandshakeError("the watchdog sent a line over %d bytes" % LINE_MAX)
        left = deadline - time.time()
        if left <= 0:
            raise HandshakeError("the watchdog did not answer in %.0f s" % HANDSHAKE_TIMEOUT)
        sock.settimeout(left)
        data = sock.recv(LINE_MAX)
        if not data:
            raise HandshakeError("the watchdog closed the connection")
        buf += data
    line, rest = buf.split(b"\n", 1)
    if len(line) >= LINE_MAX:
        raise HandshakeError("the watchdog sent a line over %d bytes" % LINE_MAX)
    return line, rest


def join(addr, secret, rank, timeout=HANDSHAKE_TIMEOUT):
    """Connect to the watchdog at ``addr`` as ``rank``: answer its challenge, check its proof.
    Returns the connected socket (and any bytes read past the handshake); raises OSError or
    HandshakeError."""
    sock = socket.create_connection(addr, timeout=timeout)
    try:
        deadline = time.time() + timeout
        line, rest = _read_line(sock, deadline)
        parts = line.split()
        if len(parts) != 2 or parts[0] != b"CHALLENGE" or not _is_hex(parts[1], 2 * NONCE_BYTES):
            raise HandshakeError("the watchdog sent no challenge")
        nonce, cnonce = parts[1], secrets.token_hex(NONCE_BYTES).encode()
        sock.sendall(b"HELLO %d %s %s\n" % (rank, cnonce, proof(secret, b"rank", rank, nonce, cnonce)))
        line, rest = _read_line(sock, deadline, rest)
        parts = line.split()
        if (len(parts) != 2 or parts[0] != b"WELCOME" or not hmac.compare_digest(
                parts[1], proof(secret, b"watchdog", rank, cnonce, nonce))):
            raise HandshakeError("the peer at %s:%d did not prove the job's secret" % addr[:2])
        return sock, rest
    except BaseException:
        sock.close()
        raise
