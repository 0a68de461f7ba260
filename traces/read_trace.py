"""Read alisa trace files (format v1, traces/FORMAT.md) with numpy only.

    from read_trace import read_trace
    t = read_trace("x.trace")
    t.header["model"], t.seqs[0]["tokens"]
    for step in t.steps():          # streaming, one step at a time
        step.seq, step.pos, step.token
        step.w                      # (n_layers, pos + 1) float32 head-mean rows
        step.residual               # (n_layers,) mass dropped by sparse rows
        step.w_head                 # (n_layers, n_heads, pos + 1) or None

Checksums, ordering and index ranges are checked as in the C reader; a
problem raises TraceError naming the file and byte offset.
"""
import struct
import sys
import zlib

import numpy as np

MAGIC = b"ALISATRC"
VERSION = 1


class TraceError(Exception):
    pass


class Step:
    __slots__ = ("seq", "pos", "token", "w", "residual", "enc", "w_head", "residual_head",
                 "offset")


class Trace:
    def __init__(self, path):
        self.path = path
        self._f = open(path, "rb")
        self._f.seek(0, 2)
        self.file_bytes = self._f.tell()
        self._f.seek(0)
        pre = self._f.read(16)
        if len(pre) < 8 or pre[:8] != MAGIC:
            raise TraceError(f"{path}: byte 0: not an alisa trace (bad magic)")
        if len(pre) < 16:
            raise TraceError(f"{path}: byte {len(pre)}: truncated preamble")
        (version,) = struct.unpack_from("<I", pre, 8)
        if version != VERSION:
            raise TraceError(f"{path}: byte 8: unsupported trace version {version}")
        self._offset = 16
        tag, payload, at = self._chunk()
        if tag != b"HEAD":
            raise TraceError(f"{path}: byte {at}: expected the HEAD chunk first")
        self.header = self._parse_head(payload)
        self.seqs = []
        for s in range(self.header["n_seqs"]):
            tag, payload, at = self._chunk()
            if tag != b"SEQ ":
                raise TraceError(f"{path}: byte {at}: expected SEQ {s}")
            seq, prompt, gen, start = struct.unpack_from("<4I", payload, 0)
            if seq != s or len(payload) != 16 + 4 * prompt:
                raise TraceError(f"{path}: byte {at}: malformed SEQ chunk")
            tokens = np.zeros(prompt + gen, dtype=np.uint32)
            tokens[:prompt] = np.frombuffer(payload, dtype="<u4", count=prompt, offset=16)
            self.seqs.append({"prompt_len": prompt, "gen_len": gen, "row_start": start,
                              "tokens": tokens, "next_pos": start})

    def _chunk(self):
        at = self._offset
        hdr = self._f.read(8)
        if len(hdr) == 0:
            raise TraceError(f"{self.path}: byte {at}: file ends before the END chunk (truncated)")
        if len(hdr) < 8:
            raise TraceError(f"{self.path}: byte {at}: truncated chunk header")
        tag = hdr[:4]
        (length,) = struct.unpack("<I", hdr[4:])
        if at + 12 + length > self.file_bytes:
            raise TraceError(f"{self.path}: byte {at}: chunk runs past the end of the file")
        body = self._f.read(length + 4)
        payload = body[:length]
        (crc,) = struct.unpack("<I", body[length:])
        if zlib.crc32(payload, zlib.crc32(hdr)) & 0xFFFFFFFF != crc:
            raise TraceError(f"{self.path}: byte {at}: chunk checksum mismatch")
        self._offset += 12 + length
        return tag, payload, at

    @staticmethod
    def _string(buf, off):
        (n,) = struct.unpack_from("<H", buf, off)
        return buf[off + 2:off + 2 + n].decode("utf-8"), off + 2 + n

    def _parse_head(self, p):
        h = {}
        h["model"], off = self._string(p, 0)
        (h["n_layers"], h["n_heads"], h["n_kv_heads"], h["hidden"], h["vocab"], h["n_seqs"],
         h["flags"], h["threshold"], h["seed"]) = struct.unpack_from("<7IfQ", p, off)
        off += 40
        for key in ("source", "model_sha256", "text", "generator"):
            h[key], off = self._string(p, off)
        return h

    def _row(self, p, off, n, at):
        enc = p[off]
        off += 1
        if enc == 0:
            row = np.frombuffer(p, dtype="<f2", count=n, offset=off).astype(np.float32)
            return row, 0.0, enc, off + 2 * n
        if enc not in (1, 2):
            raise TraceError(f"{self.path}: byte {at}: unknown row encoding {enc}")
        m, residual = struct.unpack_from("<If", p, off)
        off += 8
        itype = "<u2" if enc == 1 else "<u4"
        isz = 2 if enc == 1 else 4
        idx = np.frombuffer(p, dtype=itype, count=m, offset=off).astype(np.int64)
        off += isz * m
        val = np.frombuffer(p, dtype="<f2", count=m, offset=off).astype(np.float32)
        off += 2 * m
        if m and (idx.max() >= n or np.any(np.diff(idx) <= 0)):
            raise TraceError(f"{self.path}: byte {at}: sparse index out of range or unordered")
        row = np.zeros(n, dtype=np.float32)
        row[idx] = val
        return row, residual, enc, off

    def steps(self):
        h = self.header
        L, H = h["n_layers"], h["n_heads"]
        per_head = bool(h["flags"] & 1)
        n_steps = 0
        while True:
            tag, p, at = self._chunk()
            if tag == b"END ":
                count, n_seqs = struct.unpack("<QI", p)
                if count != n_steps or n_seqs != h["n_seqs"]:
                    raise TraceError(f"{self.path}: byte {at}: END counts disagree")
                if self._offset != self.file_bytes:
                    raise TraceError(f"{self.path}: byte {self._offset}: bytes after END")
                return
            if tag != b"STEP":
                raise TraceError(f"{self.path}: byte {at}: unexpected chunk {tag!r}")
            st = Step()
            st.seq, st.pos, st.token = struct.unpack_from("<3I", p, 0)
            s = self.seqs[st.seq]
            if st.pos != s["next_pos"]:
                raise TraceError(f"{self.path}: byte {at}: position {st.pos}, expected "
                                 f"{s['next_pos']}")
            n = st.pos + 1
            off = 12
            st.w = np.zeros((L, n), dtype=np.float32)
            st.residual = np.zeros(L, dtype=np.float32)
            st.enc = np.zeros(L, dtype=np.uint8)
            st.w_head = np.zeros((L, H, n), dtype=np.float32) if per_head else None
            st.residual_head = np.zeros((L, H), dtype=np.float32) if per_head else None
            for layer in range(L):
                st.w[layer], st.residual[layer], st.enc[layer], off = self._row(p, off, n, at)
                for head in range(H if per_head else 0):
                    (st.w_head[layer, head], st.residual_head[layer, head], _,
                     off) = self._row(p, off, n, at)
            if off != len(p):
                raise TraceError(f"{self.path}: byte {at}: bytes left over after the rows")
            s["tokens"][st.pos] = st.token
            s["next_pos"] += 1
            st.offset = at
            n_steps += 1
            yield st

    def close(self):
        self._f.close()


def read_trace(path):
    return Trace(path)


def dump(path, out=sys.stdout):
    """Prints the same lines as `alisa trace dump FILE`."""
    t = read_trace(path)
    for st in t.steps():
        for layer in range(t.header["n_layers"]):
            rows = [(-1, st.w[layer])]
            if st.w_head is not None:
                rows += [(h, st.w_head[layer, h]) for h in range(t.header["n_heads"])]
            for head, row in rows:
                for i in np.nonzero(row)[0]:
                    out.write(f"{st.seq} {st.pos} {layer} {head} {i} "
                              f"{float(row[i]):.9g}\n")
    t.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: read_trace.py FILE   (prints what `alisa trace dump FILE` prints)")
    dump(sys.argv[1])
