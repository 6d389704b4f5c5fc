"""habitat-server as a child process for the Python tests (the client's and
the agent's): started on a free port, which is read from its start-up line."""

import re
import subprocess
import threading


class ServerProcess:
    """A running habitat-server with an in-memory store; stop() ends it."""

    def __init__(self, binary: str, data_dir: str, models_dir: str, *extra_args: str):
        self.log = []
        self.process = subprocess.Popen(
            [binary, "--address=127.0.0.1:0", "--metrics_address=", "--store=memory",
             f"--data_dir={data_dir}", f"--models_dir={models_dir}",
             "--shutdown_grace_seconds=1", *extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = None
        found = threading.Event()

        def read():
            for line in self.process.stderr:
                self.log.append(line)
                match = re.search(r"serving on port (\d+)", line)
                if match and self.port is None:
                    self.port = int(match.group(1))
                    found.set()
            found.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not found.wait(120) or self.port is None:
            self.stop()
            raise RuntimeError("habitat-server did not start:\n" + "".join(self.log))
        self.address = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.reader.join(10)
        self.process.stderr.close()
