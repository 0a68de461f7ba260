"""What the peer benchmarks (flexgen_run.py, hf_decode.py) record about the
GPU machine beside their figures, shared so both say it the same way."""
import subprocess


def driver_version():
    """The NVIDIA driver's version as nvidia-smi prints it, or "unknown"."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30, check=True)
        return r.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"
