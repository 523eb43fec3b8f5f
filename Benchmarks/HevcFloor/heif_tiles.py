#!/usr/bin/env python3
"""The HEVC pictures of a HEIC's primary image, for the HEVC decode floor.

Reads a HEIF file's `meta` box (ISO/IEC 23008-12: `pitm`, `iinf`, `iloc` with
`idat`, `iref` `dimg`, `iprp`/`ipco`/`ipma` with `hvcC`) and writes what the
primary image's decoder must decode, and nothing else, in a flat file the floor
reads: for each coded picture (a grid's tiles, or the one image), its parameter
sets and its NAL units in Annex B form, each picture as a 4-byte big-endian
length then its bytes. Thumbnails (`thmb`), auxiliary images (`auxl`: depth,
HDR gain maps) and Exif are left out, as a thumbnailer reading the primary
image leaves them.

Benchmarks only: the product parses nothing with this.
Usage: heif_tiles.py IN.heic OUT.hevcs   (prints the picture count and size)
"""
import struct
import sys


def boxes(data, start, end):
    """(type, payload start, payload end) of each box in data[start:end]."""
    i = start
    while i + 8 <= end:
        size, kind = struct.unpack(">I4s", data[i:i + 8])
        header = 8
        if size == 1:
            size = struct.unpack(">Q", data[i + 8:i + 16])[0]
            header = 16
        elif size == 0:
            size = end - i
        if size < header or i + size > end:
            raise ValueError(f"box {kind!r} at {i} overruns its parent")
        yield kind.decode("latin-1"), i + header, i + size
        i += size


def child(data, start, end, kind):
    return next(((s, e) for k, s, e in boxes(data, start, end) if k == kind), None)


def uint(data, at, size):
    return int.from_bytes(data[at:at + size], "big") if size else 0


def parse_meta(data):
    meta = child(data, 0, len(data), "meta")
    if not meta:
        raise ValueError("no meta box")
    start, end = meta[0] + 4, meta[1]  # a full box: version and flags first
    items, locations, refs, props, assoc, idat = {}, {}, {}, [], {}, None
    primary = None
    for kind, s, e in boxes(data, start, end):
        version = data[s]
        if kind == "pitm":
            primary = uint(data, s + 4, 2 if version == 0 else 4)
        elif kind == "iinf":
            count_size = 2 if version == 0 else 4
            for k, es, ee in boxes(data, s + 4 + count_size, e):
                if k == "infe" and data[es] >= 2:
                    id_size = 2 if data[es] == 2 else 4
                    item_id = uint(data, es + 4, id_size)
                    items[item_id] = data[es + 4 + id_size + 2:es + 4 + id_size + 6].decode("latin-1")
        elif kind == "iloc":
            locations = parse_iloc(data, s, e)
        elif kind == "iref":
            id_size = 2 if version == 0 else 4
            for k, rs, re_ in boxes(data, s + 4, e):
                source = uint(data, rs, id_size)
                count = uint(data, rs + id_size, 2)
                targets = [uint(data, rs + id_size + 2 + n * id_size, id_size) for n in range(count)]
                refs.setdefault(k, {})[source] = targets
        elif kind == "iprp":
            ipco = child(data, s, e, "ipco")
            props = [(k, ps, pe) for k, ps, pe in boxes(data, ipco[0], ipco[1])] if ipco else []
            for k, ps, pe in boxes(data, s, e):
                if k == "ipma":
                    parse_ipma(data, ps, pe, assoc)
        elif kind == "idat":
            idat = (s, e)
    return primary, items, locations, refs, props, assoc, idat


def parse_iloc(data, s, e):
    version = data[s]
    at = s + 4
    offset_size, length_size = data[at] >> 4, data[at] & 15
    base_size, index_size = data[at + 1] >> 4, (data[at + 1] & 15) if version in (1, 2) else 0
    at += 2
    count = uint(data, at, 2 if version < 2 else 4)
    at += 2 if version < 2 else 4
    out = {}
    for _ in range(count):
        item_id = uint(data, at, 2 if version < 2 else 4)
        at += 2 if version < 2 else 4
        method = 0
        if version in (1, 2):
            method = data[at + 1] & 15
            at += 2
        at += 2  # data reference index
        base = uint(data, at, base_size)
        at += base_size
        extent_count = uint(data, at, 2)
        at += 2
        extents = []
        for _ in range(extent_count):
            at += index_size
            offset = uint(data, at, offset_size)
            length = uint(data, at + offset_size, length_size)
            at += offset_size + length_size
            extents.append((base + offset, length))
        out[item_id] = (method, extents)
    return out


def parse_ipma(data, s, e, assoc):
    version, flags = data[s], uint(data, s + 1, 3)
    entry_count = uint(data, s + 4, 4)
    at = s + 8
    for _ in range(entry_count):
        item_id = uint(data, at, 2 if version < 1 else 4)
        at += 2 if version < 1 else 4
        n = data[at]
        at += 1
        indexes = []
        for _ in range(n):
            if flags & 1:
                indexes.append(uint(data, at, 2) & 0x7FFF)
                at += 2
            else:
                indexes.append(data[at] & 0x7F)
                at += 1
        assoc[item_id] = indexes


def item_bytes(data, item_id, locations, idat):
    method, extents = locations[item_id]
    base = idat[0] if method == 1 else 0
    return b"".join(data[base + offset:base + offset + length] for offset, length in extents)


def hvcc(data, item_id, props, assoc):
    """(parameter sets in Annex B, NAL length size) from the item's hvcC."""
    for index in assoc.get(item_id, []):
        kind, s, e = props[index - 1]
        if kind == "hvcC":
            length_size = (data[s + 21] & 3) + 1
            at, sets = s + 23, b""
            for _ in range(data[s + 22]):
                at += 1
                for _ in range(uint(data, at, 2)):
                    size = uint(data, at + 2, 2)
                    sets += b"\0\0\0\1" + data[at + 4:at + 4 + size]
                    at += 2 + size
                at += 2
            return sets, length_size
    raise ValueError(f"item {item_id} has no hvcC")


def annex_b(sample, length_size):
    out, at = b"", 0
    while at + length_size <= len(sample):
        size = uint(sample, at, length_size)
        out += b"\0\0\0\1" + sample[at + length_size:at + length_size + size]
        at += length_size + size
    return out


def pictures(path):
    with open(path, "rb") as f:
        data = f.read()
    primary, items, locations, refs, props, assoc, idat = parse_meta(data)
    tiles = refs.get("dimg", {}).get(primary, []) if items.get(primary) == "grid" else [primary]
    out = []
    for tile in tiles:
        sets, length_size = hvcc(data, tile, props, assoc)
        out.append(sets + annex_b(item_bytes(data, tile, locations, idat), length_size))
    return out


def main():
    coded = pictures(sys.argv[1])
    with open(sys.argv[2], "wb") as f:
        for picture in coded:
            f.write(struct.pack(">I", len(picture)) + picture)
    print(f"{sys.argv[1]}: {len(coded)} pictures, {sum(map(len, coded))} bytes")


if __name__ == "__main__":
    main()
