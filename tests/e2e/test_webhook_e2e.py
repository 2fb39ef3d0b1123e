"""nvdra-webhook, the real binary over real TLS, against clients that mean
harm: connections that send nothing or trickle a body (slowloris), bodies
sent in part to hold memory, a review with thousands of configs, a FIFO at
the certificate's path, and SIGTERM while all that goes on. Throughout, a
well-behaved AdmissionReview must be answered within a second.

The numbers (answer times, the process's RSS before, during and after an
attack) are printed, so a run's log shows them.
"""

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))

import localnode  # noqa: E402

BINARY = os.path.join(localnode.BIN, "nvdra-webhook")
VALIDATE = "/validate-resource-claim-parameters"
MIB = 1 << 20
# A well-behaved request's answer time, under any of the attacks below.
ANSWER_WITHIN_S = 1.0


def make_cert(workdir, serial):
    """A self-signed EC certificate for 127.0.0.1; returns (cert, key) paths."""
    cert, key = os.path.join(workdir, "cert-%d.pem" % serial), os.path.join(workdir, "key-%d.pem" % serial)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-set_serial", str(serial),
                    "-subj", "/CN=nvdra-webhook-e2e-%d" % serial,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def install(src, dst):
    """Replaces dst with a copy of src by rename, as a Secret volume does."""
    with open(src, "rb") as f:
        data = f.read()
    with open(dst + ".new", "wb") as f:
        f.write(data)
    os.rename(dst + ".new", dst)


def review(configs=1, interval="Long", uid="9a1d1f5e-3c1b-4e55-9b1e-000000000001"):
    params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
              "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": interval}}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "c", "namespace": "default"},
             "spec": {"devices": {
                 "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
                 "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": params}}
                            for _ in range(configs)]}}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": uid, "operation": "CREATE", "object": claim,
                                   "resource": {"group": "resource.k8s.io", "version": "v1",
                                                "resource": "resourceclaims"}}}).encode()


def post_head(length):
    return ("POST %s HTTP/1.1\r\nHost: nvdra-webhook\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (VALIDATE, length)).encode()


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS for %d" % pid)


class Webhook:
    """One nvdra-webhook process on a free loopback port."""

    def __init__(self, workdir, cert, key, trusted, args=()):
        workdir = tempfile.mkdtemp(dir=workdir)
        self.cert_path, self.key_path = os.path.join(workdir, "tls.crt"), os.path.join(workdir, "tls.key")
        install(cert, self.cert_path)
        install(key, self.key_path)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = open(os.path.join(workdir, "webhook.log"), "w+")
        self.proc = subprocess.Popen([BINARY, "--tls-cert-file", self.cert_path, "--tls-private-key-file",
                                      self.key_path, "--port", str(self.port),
                                      "--feature-gates", "TimeSlicingSettings=true"] + list(args),
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.ctx = ssl.create_default_context(cafile=trusted)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.request(b"", path="/readyz", method="GET")
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise AssertionError("nvdra-webhook did not start: " + self.output())
                time.sleep(0.05)

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def tls(self, timeout=5.0):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return self.ctx.wrap_socket(raw, server_hostname="127.0.0.1")

    def request(self, body, path=VALIDATE, method="POST", timeout=5.0):
        """(status, body, seconds, the server certificate's serial)."""
        start = time.monotonic()
        with self.tls(timeout) as s:
            serial = int(s.getpeercert()["serialNumber"], 16)
            head = ("%s %s HTTP/1.1\r\nHost: nvdra-webhook\r\nContent-Type: application/json\r\n"
                    "Content-Length: %d\r\nConnection: close\r\n\r\n" % (method, path, len(body))).encode()
            s.sendall(head + body)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        elapsed = time.monotonic() - start
        head, _, payload = data.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 "):
            raise OSError("no HTTP answer: %r" % data[:200])
        return int(head[9:12]), payload, elapsed, serial

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Prober(threading.Thread):
    """Sends a well-behaved review on a new connection every 50 ms and keeps
    each one's answer time, or its failure."""

    def __init__(self, hook):
        super().__init__(daemon=True)
        self.hook, self.times, self.failures = hook, [], []
        self.done = threading.Event()

    def run(self):
        body = review()
        while not self.done.is_set():
            try:
                status, payload, elapsed, _ = self.hook.request(body, timeout=10.0)
                if status != 200 or json.loads(payload)["response"]["allowed"] is not True:
                    self.failures.append("status %d: %r" % (status, payload[:200]))
                self.times.append(elapsed)
            except (OSError, ValueError) as e:
                self.failures.append(repr(e))
            self.done.wait(0.05)

    def stop(self):
        self.done.set()
        self.join(30)


class Attack:
    """Connections that hold the server: idle TCP, TLS connections that send
    a head and trickle their body, and TLS connections that send most of a
    body and stop."""

    def __init__(self, hook):
        self.hook, self.socks, self.lock = hook, [], threading.Lock()

    def idle(self, n):
        for _ in range(n):
            self.keep(socket.create_connection(("127.0.0.1", self.hook.port), timeout=10))

    def keep(self, s):
        with self.lock:
            self.socks.append(s)

    def tls_with(self, data):
        """A TLS connection that sent data; None when the server refused or closed it."""
        s = None
        try:
            s = self.hook.tls(timeout=10)
            s.sendall(data)
        except OSError:
            if s is not None:
                s.close()
            return None
        self.keep(s)
        return s

    def trickle(self, n, seconds):
        socks = [s for s in (self.tls_with(post_head(3 * MIB - 1) + b"{") for _ in range(n)) if s]
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for s in socks:
                try:
                    s.sendall(b" ")
                except OSError:
                    pass
            time.sleep(0.2)

    def partial_bodies(self, n, send=2 * MIB + MIB // 2):
        for _ in range(n):
            self.tls_with(post_head(3 * MIB - 1) + b"{" + b" " * send)

    def close(self):
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass
            self.socks = []


class WebhookAttackTest(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="nvdra-webhook-e2e-")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.workdir])
        self.first = make_cert(self.workdir, 1001)
        self.second = make_cert(self.workdir, 1002)
        self.trusted = os.path.join(self.workdir, "trusted.pem")
        with open(self.trusted, "w") as out:
            for cert in (self.first[0], self.second[0]):
                with open(cert) as f:
                    out.write(f.read())
        self.hook = self.start()

    def start(self, *args):
        hook = Webhook(self.workdir, self.first[0], self.first[1], self.trusted, args)
        self.addCleanup(hook.close)
        return hook

    def assertAnsweredInTime(self, prober, at_least=20):
        self.assertEqual(prober.failures, [], "well-behaved reviews failed under attack")
        self.assertGreaterEqual(len(prober.times), at_least)
        self.assertLess(max(prober.times), ANSWER_WITHIN_S, "answer times %s" % sorted(prober.times)[-5:])

    def test_slow_and_idle_clients_neither_lock_out_reviews_nor_hold_memory(self):
        hook = self.hook
        for _ in range(5):
            hook.request(review())
        before = rss_mib(hook.proc.pid)
        prober = Prober(hook)
        prober.start()
        attack = Attack(hook)
        self.addCleanup(attack.close)
        peak = before
        try:
            # More idle connections than the server holds (256), then bodies
            # trickled byte by byte, then 50 bodies of 2.5 MiB left unfinished.
            attack.idle(300)
            trickler = threading.Thread(target=attack.trickle, args=(40, 4.0), daemon=True)
            trickler.start()
            for _ in range(5):
                attack.partial_bodies(10)
                peak = max(peak, rss_mib(hook.proc.pid))
            trickler.join(30)
            peak = max(peak, rss_mib(hook.proc.pid))
        finally:
            prober.stop()
            attack.close()
        # Once the attack is over, the memory it took goes back.
        deadline = time.monotonic() + 10
        after = rss_mib(hook.proc.pid)
        while after > before + 8 and time.monotonic() < deadline:
            time.sleep(0.1)
            after = rss_mib(hook.proc.pid)
        times = sorted(prober.times)
        print("\nslowloris: %d reviews answered, median %.1f ms, max %.1f ms; RSS before %.1f MiB, "
              "peak %.1f MiB, after %.1f MiB" % (len(times), 1000 * times[len(times) // 2] if times else -1,
                                                  1000 * times[-1] if times else -1, before, peak, after),
              file=sys.stderr)
        self.assertAnsweredInTime(prober)
        # 32 MiB of bodies at most are held at once, whatever is sent.
        self.assertLess(peak, before + 64, "RSS before %.1f MiB, peak %.1f MiB" % (before, peak))
        self.assertLess(after, before + 8, "RSS before %.1f MiB, after %.1f MiB" % (before, after))
        status, _, _, _ = hook.request(review())
        self.assertEqual(status, 200)

    def test_the_deadlines_for_head_and_body_are_flags(self):
        hook = self.start("--read-header-timeout=300ms", "--read-body-timeout=500ms")
        start = time.monotonic()
        # Sends nothing: closed once the head's time is up.
        with socket.create_connection(("127.0.0.1", hook.port), timeout=10) as silent:
            self.assertEqual(silent.recv(1), b"")
        self.assertLess(time.monotonic() - start, 5)
        # Sends its head but not the whole body: closed once the body's time is up.
        with hook.tls(timeout=10) as s:
            s.sendall(post_head(100) + b"{")
            start = time.monotonic()
            self.assertEqual(s.recv(1), b"")
            self.assertGreater(time.monotonic() - start, 0.3)
            self.assertLess(time.monotonic() - start, 5)
        status, _, _, _ = hook.request(review())
        self.assertEqual(status, 200)

    def test_a_body_over_the_api_servers_limit_is_refused_with_413(self):
        # Refused from its Content-Length, before the body is read.
        with self.hook.tls() as s:
            s.sendall(post_head(3 * MIB + 1) + b"{")
            answer = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
        self.assertTrue(answer.startswith(b"HTTP/1.1 413 "), answer)
        self.assertTrue(answer.endswith(b"\r\n\r\nrequest body larger than 3145728 bytes\n"), answer)

    def test_bodies_of_a_million_values_are_refused_unparsed(self):
        # Parsed, each would be a million objects: seconds of work and some
        # 80 MiB of memory, times the workers.
        hook = self.hook
        body = b"[" + b"{}," * (MIB - 2) + b"{}]"  # 3 MiB less 2 bytes
        before, peak, results, errors = rss_mib(hook.proc.pid), 0.0, [], []

        def send():
            try:
                results.append(hook.request(body, timeout=30))
            except OSError as e:
                errors.append(repr(e))

        sending = [threading.Thread(target=send) for _ in range(8)]
        for t in sending:
            t.start()
        while any(t.is_alive() for t in sending):
            peak = max(peak, rss_mib(hook.proc.pid))
            time.sleep(0.01)
        print("\na million values, 8 at once: answered in %s ms; RSS before %.1f MiB, peak %.1f MiB" % (
            ", ".join("%.0f" % (1000 * r[2]) for r in results), before, peak), file=sys.stderr)
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 8)
        for status, payload, elapsed, _ in results:
            self.assertEqual(status, 400)
            self.assertIn(b"the request body holds more than 200000 JSON values; refusing to decode it", payload)
            self.assertLess(elapsed, ANSWER_WITHIN_S)
        self.assertLess(peak, before + 64)

    def test_the_memory_of_large_parses_is_given_back(self):
        # 200,000 values, just within the limit: parsed, each body is some
        # 20 MiB of small allocations, which the allocator would keep.
        hook = self.hook
        body = (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "pad": [' +
                b"{}," * 199000 + b"{}]}")
        before, peak, statuses = rss_mib(hook.proc.pid), 0.0, []

        def send():
            for _ in range(3):
                statuses.append(hook.request(body, timeout=30)[0])

        sending = [threading.Thread(target=send) for _ in range(8)]
        for t in sending:
            t.start()
        while any(t.is_alive() for t in sending):
            peak = max(peak, rss_mib(hook.proc.pid))
            time.sleep(0.01)
        deadline = time.monotonic() + 10
        after = rss_mib(hook.proc.pid)
        while after > before + 8 and time.monotonic() < deadline:
            time.sleep(0.1)
            after = rss_mib(hook.proc.pid)
        print("\nlarge parses, 8 at once: RSS before %.1f MiB, peak %.1f MiB, after %.1f MiB" % (before, peak, after),
              file=sys.stderr)
        self.assertEqual(statuses, [400] * 24)  # no request in the AdmissionReview
        self.assertLess(peak, before + 160)
        self.assertLess(after, before + 8)

    def test_thousands_of_configs_are_refused_at_once(self):
        prober = Prober(self.hook)
        prober.start()
        try:
            results = []
            body = review(4000)

            def send(times):
                for _ in range(times):
                    results.append(self.hook.request(body, timeout=30))

            workers = [threading.Thread(target=send, args=(5,)) for _ in range(2)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(60)
            # The API server allows 32; every one of 32 is judged.
            status, payload, _, _ = self.hook.request(review(32, interval="Sometimes"))
        finally:
            prober.stop()
        self.assertEqual(len(results), 10)
        print("\n4000 configs: answered in %s ms" % ", ".join("%.0f" % (1000 * r[2]) for r in results),
              file=sys.stderr)
        for status_4000, payload_4000, elapsed, _ in results:
            self.assertEqual(status_4000, 200)
            answer = json.loads(payload_4000)["response"]
            self.assertFalse(answer["allowed"])
            self.assertEqual(answer["status"]["reason"], "Invalid")
            self.assertEqual(answer["status"]["message"],
                             "spec.devices.config: Too many: 4000: must have at most 32 items")
            # Tens of milliseconds are expected; seconds mean a scan per config.
            self.assertLess(elapsed, 2.0)
        self.assertEqual(status, 200)
        message = json.loads(payload)["response"]["status"]["message"]
        self.assertTrue(message.startswith("32 configs failed to validate: "), message)
        self.assertIn("spec.devices.config[31].opaque.parameters is invalid", message)
        self.assertAnsweredInTime(prober, at_least=5)

    def test_a_fifo_at_the_certificate_path_stalls_nothing(self):
        hook = self.hook
        fifo = os.path.join(self.workdir, "fifo")
        os.mkfifo(fifo)
        os.rename(fifo, hook.cert_path)
        # New connections ask for the files to be read again: the FIFO is
        # refused, the first certificate served on.
        for _ in range(3):
            status, _, elapsed, serial = hook.request(review())
            self.assertEqual((status, serial), (200, 1001))
            self.assertLess(elapsed, ANSWER_WITHIN_S)
        install(self.second[1], hook.key_path)
        install(self.second[0], hook.cert_path)
        deadline = time.monotonic() + 15
        serial = 1001
        while serial != 1002 and time.monotonic() < deadline:
            status, _, _, serial = hook.request(review())
            self.assertEqual(status, 200)
        self.assertEqual(serial, 1002, "the renewed certificate was not picked up: " + hook.output())
        self.assertIn("not a regular file", hook.output())

    def test_sigterm_under_load_ends_the_process_within_a_second(self):
        hook = self.hook
        attack = Attack(hook)
        self.addCleanup(attack.close)
        attack.idle(200)
        attack.partial_bodies(20)
        stop = threading.Event()
        answered = threading.Semaphore(0)
        body = review(4000)

        def flood():
            # Reviews of 4000 configs, one after another on each thread.
            while not stop.is_set():
                try:
                    hook.request(body, timeout=60)
                except OSError:
                    return
                answered.release()

        floods = [threading.Thread(target=flood, daemon=True) for _ in range(4)]
        for f in floods:
            f.start()
        # Each flood has had an answer and sent its next review.
        for _ in range(4):
            self.assertTrue(answered.acquire(timeout=120), "the load did not get going")
        # Load is on: a review is answered while it runs.
        status, _, elapsed, _ = hook.request(review())
        self.assertEqual(status, 200)
        self.assertLess(elapsed, ANSWER_WITHIN_S)
        start = time.monotonic()
        hook.proc.send_signal(signal.SIGTERM)
        try:
            code = hook.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        took = time.monotonic() - start
        stop.set()
        print("\nSIGTERM under load: exited in %.1f ms" % (1000 * took), file=sys.stderr)
        self.assertEqual(code, 0, hook.output())
        # One second is the promise; the margin is for a loaded test machine.
        self.assertLess(took, 1.5)


if __name__ == "__main__":
    unittest.main()
