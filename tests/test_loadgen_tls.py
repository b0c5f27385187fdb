"""redline-load over TLS against redis-server started with TLS, certificates made by the
openssl CLI in the test."""
import subprocess

import pytest
import redis

from test_loadgen import BIN, free_port, redis_server, run_load



def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=redline-test-ca", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    # a second CA that did not sign the server certificate
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.crt",
            "-days", "2", "-subj", "/CN=other-ca", cwd=d)
    return d


def tls_server(certs, auth_clients):
    port = free_port()
    return redis_server("--port", "0", "--tls-port", str(port), "--tls-cert-file", str(certs / "server.crt"),
                        "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file", str(certs / "ca.crt"),
                        "--tls-auth-clients", auth_clients, port=port)


def tls_client(srv, certs):
    return redis.Redis(host="127.0.0.1", port=srv.port, ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
                       ssl_certfile=str(certs / "client.crt"), ssl_keyfile=str(certs / "client.key"))


def test_tls_with_ca_verification(certs, tmp_path):
    with tls_server(certs, "no") as srv:
        _, data = run_load(["-s", "127.0.0.1", "-p", srv.port, "--tls", "--cacert", certs / "ca.crt",
                            "-n", 500, "-c", 3, "-t", 2, "--pipeline", 8, "--ratio", "1:1", "-d", 3000,
                            "--hide-histogram"], tmp_path)
        assert data["ALL STATS"]["Totals"]["Count"] == 3000
        stats = tls_client(srv, certs).info("commandstats")
        assert stats["cmdstat_set"]["calls"] == 1500 and stats["cmdstat_get"]["calls"] == 1500


def test_mutual_tls_and_wrong_ca(certs, tmp_path):
    with tls_server(certs, "yes") as srv:
        args = ["-s", "127.0.0.1", "-p", srv.port, "--tls", "-n", 100, "-c", 2, "-t", 1, "--hide-histogram"]
        _, data = run_load([*args, "--cacert", certs / "ca.crt", "--cert", certs / "client.crt",
                            "--key", certs / "client.key"], tmp_path)
        assert data["ALL STATS"]["Totals"]["Count"] == 200
        proc, _ = run_load([*args, "--cacert", certs / "other.crt"], tmp_path, expect_rc=1)
        assert "TLS handshake failed" in proc.stderr


def test_tls_flag_errors(certs):
    proc = subprocess.run([str(BIN), "--tls", "--cacert", str(certs / "missing.crt")], capture_output=True,
                          text=True, timeout=10)
    assert proc.returncode == 2 and "--cacert" in proc.stderr
    proc = subprocess.run([str(BIN), "--tls", "--cacert", str(certs / "ca.crt"), "--cert", str(certs / "client.crt")],
                          capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2 and "together" in proc.stderr
