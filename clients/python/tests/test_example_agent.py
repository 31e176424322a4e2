"""The example agent (examples/agent.py) against the quickstart: the same
configs/quickstart.yaml the README runs, on free ports, with the real
`gateway send`. The customer's message is answered once; its duplicate
never reaches the agent."""

import json
import os
import re
import subprocess
import sys
import threading
import unittest

from gateway import REPO, Gateway, free_port, gateway_binary


def quickstart_on(gw_port: int, admin_port: int, agent_port: int) -> tuple[str, str]:
    cfg = (REPO / "configs" / "quickstart.yaml").read_text("utf-8")
    swaps = [
        (r"(?m)^listen: 127\.0\.0\.1:8080", f"listen: 127.0.0.1:{gw_port}"),
        (re.escape("admin: {listen: 127.0.0.1:8081}"), f"admin: {{listen: 127.0.0.1:{admin_port}}}"),
        (re.escape("path: data/ledger.db"), 'path: "{dir}/ledger.db"'),
        (re.escape("format: console"), "format: json"),
        (re.escape("url: http://127.0.0.1:9000/events"), f"url: http://127.0.0.1:{agent_port}/events"),
    ]
    for pattern, repl in swaps:
        cfg, n = re.subn(pattern, lambda _m, r=repl: r, cfg, count=1)
        if n != 1:
            raise AssertionError(f"configs/quickstart.yaml no longer has {pattern}")
    m = re.search(r"signing_secret: (whsec_\S+)", cfg)
    if not m:
        raise AssertionError("configs/quickstart.yaml names no forward.signing_secret")
    return cfg, m.group(1)


class ExampleAgent(unittest.TestCase):
    def test_answers_the_quickstart_send_once_and_its_duplicate_not_at_all(self):
        gw_port, admin_port, agent_port = free_port(), free_port(), free_port()
        config, secret = quickstart_on(gw_port, admin_port, agent_port)
        agent = subprocess.Popen(
            [sys.executable, str(REPO / "clients" / "python" / "examples" / "agent.py"), "--listen", f"127.0.0.1:{agent_port}",
             "--ledger", f"http://127.0.0.1:{admin_port}", "--signing-secret", secret],
            stdout=subprocess.PIPE, text=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        lines, listening = [], threading.Event()

        def read():
            for line in agent.stdout:
                rec = json.loads(line)
                lines.append(rec)
                if rec["msg"] == "agent listening":
                    listening.set()
            listening.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        gw = None
        try:
            self.assertTrue(listening.wait(30) and agent.poll() is None, "the agent did not start")
            gw = Gateway(config)

            def send(event_id, text):
                return subprocess.run([gateway_binary(), "send", "--config", gw.config_path, "--source", "demo",
                                       "--conversation", "c1", "--message", text, "--event-id", event_id],
                                      capture_output=True, text=True, check=True).stdout

            self.assertIn('"status":"delivered"', send("evt_1", "Where is my order?"))
            self.assertIn('"status":"duplicate"', send("evt_1", "Where is my order?"))
            self.assertIn('"status":"delivered"', send("evt_2", "It was due yesterday."))
            # Stop the agent and read its output to the end before counting.
            agent.terminate()
            agent.wait(30)
            reader.join(10)
            replies = [r["answers"] for r in lines if r["msg"] == "demo chat: reply received"]
            self.assertEqual(replies, [["evt_1"], ["evt_2"]], "one reply per customer message")
            self.assertEqual(len([r for r in lines if r["msg"] == "event handled"]), 2, "the duplicate never reached the agent")
        finally:
            if gw is not None:
                gw.stop()
            agent.terminate()
            agent.wait(30)
            reader.join(10)
            agent.stdout.close()


if __name__ == "__main__":
    unittest.main()
