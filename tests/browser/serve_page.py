#!/usr/bin/env python3
"""The page of nmt-serve in a real browser: headless Chromium, driven over
the DevTools protocol on a pipe (--remote-debugging-pipe; Python's standard
library only), loads http://127.0.0.1:PORT/, types SENTENCE into the text box,
clicks Translate, waits for the answer, reads the translation and every
heatmap cell from the DOM, hovers one cell, switches to word level and reads
the cells again, and writes a screenshot of each state to OUT_DIR.

    tests/browser/serve_page.py PORT SENTENCE OUT_DIR

Prints one JSON object: {"translation", "pieces": {...}, "words": {...},
"hover", "status"}, each level {"source", "target", "weights", "colors"}
as the DOM shows them. Exits 1 with one line on stderr when Chromium cannot
be started or the page does not answer in time. NMT_CHROMIUM names the
browser (default: chromium)."""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    """Chromium with the DevTools protocol on fds 3 (commands) and 4 (replies)."""

    def __init__(self, exe, profile):
        cmd_r, self.cmd_w = os.pipe()
        self.out_r, out_w = os.pipe()

        def child_fds():
            # Through fresh numbers first: a pipe end that already is fd 3 or 4
            # would keep its close-on-exec flag through dup2 to itself (a
            # no-op), or be overwritten by the other end before it moved.
            a, b = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "--window-size=1100,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=child_fds, close_fds=False)
        os.close(cmd_r)
        os.close(out_w)
        self.next_id, self.buffer, self.events = 0, b"", []

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            reply = self.read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise TimeoutError(f"{method}: no reply in {timeout} s")

    def read(self):
        while b"\0" not in self.buffer:
            chunk = os.read(self.out_r, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self.buffer += chunk
        msg, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(msg)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main():
    port, sentence, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    exe = os.environ.get("NMT_CHROMIUM", "chromium")
    if shutil.which(exe) is None:
        sys.exit(f"serve_page.py: no browser '{exe}' (Debian: apt install chromium; scripts/setup.sh installs it)")
    profile = tempfile.mkdtemp(prefix="nmt-chromium-")
    b = Browser(exe, profile)
    try:
        print(json.dumps(drive(b, port, sentence, out_dir)))
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)


def drive(b, port, sentence, out_dir):
    target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    s = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def js(expr):
        r = b.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True}, s)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(expr, what, seconds=60):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if js(expr):
                return
            time.sleep(0.05)
        raise TimeoutError(f"{what}: not within {seconds} s")

    def click(selector):  # a real mouse click at the element's centre
        x, y = js(f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                  " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            b.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}, s)
        return x, y

    def screenshot(name):
        png = b.send("Page.captureScreenshot", {"format": "png"}, s)["data"]
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(base64.b64decode(png))

    def cells():
        return js("""(() => {
          const rows = [...document.querySelectorAll('#heatmap tr')];
          const source = [...rows[0].querySelectorAll('th.src')].map(t => t.textContent);
          const target = rows.slice(1).map(r => r.querySelector('th.tgt').textContent);
          const weights = rows.slice(1).map(r => [...r.querySelectorAll('td.cell')].map(c => Number(c.dataset.weight)));
          const colors = rows.slice(1).map(r => [...r.querySelectorAll('td.cell')].map(c => getComputedStyle(c).backgroundColor));
          return {source, target, weights, colors};
        })()""")

    b.send("Page.enable", session=s)
    b.send("Page.navigate", {"url": f"http://127.0.0.1:{port}/"}, s)
    wait_for("document.readyState === 'complete' && !!document.getElementById('translate')", "the page")
    click("#text")
    js("document.getElementById('text').select()")
    b.send("Input.insertText", {"text": sentence}, s)  # typed, as a keyboard would
    click("#translate")
    wait_for("document.body.dataset.done === '1' || document.getElementById('status').textContent !== ''",
             "the translation")
    result = {"status": js("document.getElementById('status').textContent"),
              "typed": js("document.getElementById('text').value"),
              "translation": js("document.getElementById('translation').textContent"),
              "pieces": cells()}
    x, y = click("#heatmap td.cell")  # hover (and click) the first cell
    b.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y}, s)
    wait_for("document.getElementById('hover').textContent.includes(':')", "the hover text", 10)
    result["hover"] = js("document.getElementById('hover').textContent")
    screenshot("page-pieces.png")
    click("input[name=level][value=word]")
    wait_for("document.body.dataset.done === '2'", "the word-level matrix")
    result["words"] = cells()
    screenshot("page-words.png")
    # The model list (GET /models), shown when there are several; the second
    # one chosen as a person would (the select's value, then its change event).
    wait_for("document.getElementById('model').options.length > 0", "the model list", 10)
    result["models"] = js("[...document.getElementById('model').options].map(o => o.value)")
    result["model_shown"] = js("!document.getElementById('model-label').hidden")
    if len(result["models"]) > 1:
        js("(() => { const m = document.getElementById('model'); m.value = m.options[1].value;"
           " m.dispatchEvent(new Event('change')); })()")
        wait_for("document.body.dataset.done === '3'", "the second model's translation")
        result["second_translation"] = js("document.getElementById('translation').textContent")
    return result


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, TimeoutError, OSError) as e:
        sys.exit(f"serve_page.py: {e}")
