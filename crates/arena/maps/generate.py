#!/usr/bin/env python3
"""Writes the arena's shipped Tiled maps: courtyard.tmx (40 x 30) and metropolis.tmx (400 x 400).

    python3 crates/arena/maps/generate.py

Deterministic (a fixed seed), so re-running it reproduces the committed files byte for byte.
The maps can be opened and edited in Tiled; after hand edits, stop regenerating them.

Conventions (read by tickwire_arena::map): one tile = one metre; tile layer `walls`, any
non-empty tile is a wall; point objects of class `spawn`; rectangle objects of class
`teleport` with an object property `destination` referencing a rectangle zone object.
"""

import os
import random
import struct
import zlib

TILE_PX = 32
HERE = os.path.dirname(os.path.abspath(__file__))


class Map:
    def __init__(self, width, height):
        self.width = width
        self.height = height
        self.walls = [[0] * width for _ in range(height)]
        self.objects = []  # (xml, id)
        self.next_id = 1

    def wall_rect(self, x, y, w, h):
        for yy in range(max(0, y), min(self.height, y + h)):
            for xx in range(max(0, x), min(self.width, x + w)):
                self.walls[yy][xx] = 1

    def clear_rect(self, x, y, w, h):
        for yy in range(max(0, y), min(self.height, y + h)):
            for xx in range(max(0, x), min(self.width, x + w)):
                self.walls[yy][xx] = 0

    def free(self, x, y, w=1, h=1):
        if x < 0 or y < 0 or x + w > self.width or y + h > self.height:
            return False
        return all(
            not self.walls[yy][xx] for yy in range(y, y + h) for xx in range(x, x + w)
        )

    def border(self):
        self.wall_rect(0, 0, self.width, 1)
        self.wall_rect(0, self.height - 1, self.width, 1)
        self.wall_rect(0, 0, 1, self.height)
        self.wall_rect(self.width - 1, 0, 1, self.height)

    def add_object(self, body_fn):
        object_id = self.next_id
        self.next_id += 1
        self.objects.append(body_fn(object_id))
        return object_id

    def spawn(self, name, tx, ty):
        """A spawn point at the centre of tile (tx, ty)."""
        px, py = (tx + 0.5) * TILE_PX, (ty + 0.5) * TILE_PX
        return self.add_object(
            lambda i: f'  <object id="{i}" name="{name}" class="spawn" x="{px:g}" y="{py:g}">\n'
            f"   <point/>\n  </object>"
        )

    def zone(self, name, tx, ty, tw, th):
        return self.add_object(
            lambda i: f'  <object id="{i}" name="{name}" class="zone" x="{tx * TILE_PX}" '
            f'y="{ty * TILE_PX}" width="{tw * TILE_PX}" height="{th * TILE_PX}"/>'
        )

    def teleport(self, name, tx, ty, tw, th, destination_id):
        return self.add_object(
            lambda i: f'  <object id="{i}" name="{name}" class="teleport" x="{tx * TILE_PX}" '
            f'y="{ty * TILE_PX}" width="{tw * TILE_PX}" height="{th * TILE_PX}">\n'
            f"   <properties>\n"
            f'    <property name="destination" type="object" value="{destination_id}"/>\n'
            f"   </properties>\n  </object>"
        )

    def tmx(self):
        rows = []
        for y, row in enumerate(self.walls):
            line = ",".join(str(v) for v in row)
            rows.append(line + ("," if y < self.height - 1 else ""))
        data = "\n".join(rows)
        objects = "\n".join(self.objects)
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<map version="1.10" tiledversion="1.10.2" orientation="orthogonal" '
            f'renderorder="right-down" width="{self.width}" height="{self.height}" '
            f'tilewidth="{TILE_PX}" tileheight="{TILE_PX}" infinite="0" '
            f'backgroundcolor="#20242c" nextlayerid="3" nextobjectid="{self.next_id}">\n'
            f' <tileset firstgid="1" name="arena" tilewidth="{TILE_PX}" tileheight="{TILE_PX}" '
            f'tilecount="2" columns="2">\n'
            f'  <image source="tiles.png" width="{2 * TILE_PX}" height="{TILE_PX}"/>\n'
            f" </tileset>\n"
            f' <layer id="1" name="walls" width="{self.width}" height="{self.height}">\n'
            f'  <data encoding="csv">\n{data}\n</data>\n'
            f" </layer>\n"
            f' <objectgroup id="2" name="objects">\n{objects}\n </objectgroup>\n'
            f"</map>\n"
        )


def courtyard():
    """40 x 30 m: a walled courtyard with cover and two pads, for a handful of players."""
    m = Map(40, 30)
    m.border()
    # Cover: two low walls, a divider with gaps, and four pillars.
    m.wall_rect(8, 8, 9, 1)
    m.wall_rect(23, 21, 9, 1)
    m.wall_rect(20, 10, 1, 10)
    for x, y in ((12, 14), (27, 14), (12, 24), (27, 5)):
        m.wall_rect(x, y, 2, 2)
    for name, (x, y) in (
        ("north-west", (4, 4)),
        ("north", (20, 4)),
        ("north-east", (35, 4)),
        ("west", (4, 16)),
        ("east", (35, 16)),
        ("south-west", (4, 25)),
        ("south", (20, 25)),
        ("south-east", (35, 25)),
    ):
        m.spawn(name, x, y)
    west_zone = m.zone("west landing", 3, 9, 4, 4)
    east_zone = m.zone("east landing", 33, 9, 4, 4)
    m.teleport("west pad", 2, 19, 2, 2, east_zone)
    m.teleport("east pad", 36, 19, 2, 2, west_zone)
    return m


def metropolis():
    """400 x 400 m of city blocks around an open square with a 200 m^2 plaza zone."""
    rng = random.Random(20240611)
    size, block = 400, 25
    m = Map(size, size)
    m.border()
    central = range(6, 10)  # blocks 6..9 on both axes: an open square of 100 x 100 m

    # Block interiors are x, y in [origin + 4, origin + 24): streets 4 m wide between them.
    for by in range(size // block):
        for bx in range(size // block):
            if bx in central and by in central:
                continue
            ox, oy = bx * block, by * block
            kind = rng.choice(["building", "building", "pillars", "wall", "empty"])
            if kind == "building":
                w, h = rng.randint(10, 17), rng.randint(8, 15)
                x0, y0 = ox + 4 + rng.randint(0, 20 - w), oy + 4 + rng.randint(0, 20 - h)
                m.wall_rect(x0, y0, w, 1)
                m.wall_rect(x0, y0 + h - 1, w, 1)
                m.wall_rect(x0, y0, 1, h)
                m.wall_rect(x0 + w - 1, y0, 1, h)
                # Doors 3 m wide in two of the four sides.
                for side in rng.sample(["n", "s", "w", "e"], 2):
                    if side in "ns":
                        dx = x0 + rng.randint(2, w - 5)
                        m.clear_rect(dx, y0 if side == "n" else y0 + h - 1, 3, 1)
                    else:
                        dy = y0 + rng.randint(2, h - 5)
                        m.clear_rect(x0 if side == "w" else x0 + w - 1, dy, 1, 3)
            elif kind == "pillars":
                for _ in range(rng.randint(3, 6)):
                    m.wall_rect(ox + 5 + rng.randint(0, 16), oy + 5 + rng.randint(0, 16), 2, 2)
            elif kind == "wall":
                length = rng.randint(8, 18)
                if rng.random() < 0.5:
                    m.wall_rect(ox + 5, oy + 5 + rng.randint(0, 14), length, 1)
                else:
                    m.wall_rect(ox + 5 + rng.randint(0, 14), oy + 5, 1, length)

    # The destination: 20 x 10 m = 200 m^2 in the middle of the open square.
    plaza = m.zone("plaza", 190, 195, 20, 10)

    # Pads 4 x 4 m on street crossings, spread over the city.
    crossings = [
        (bx, by)
        for by in range(1, size // block)
        for bx in range(1, size // block)
        if not (bx in range(6, 11) and by in range(6, 11))
    ]
    pads = rng.sample(crossings, 24)
    pads.sort(key=lambda c: (c[1], c[0]))
    pad_tiles = set()
    for n, (bx, by) in enumerate(pads, start=1):
        x, y = bx * block, by * block
        assert m.free(x, y, 4, 4), (x, y)
        m.teleport(f"pad {n}", x, y, 4, 4, plaza)
        pad_tiles.update((xx, yy) for xx in range(x, x + 4) for yy in range(y, y + 4))

    # Spawn points: a few per block on tiles whose 3 x 3 neighbourhood is free, off pads
    # and away from the plaza.
    count = 0
    for by in range(size // block):
        for bx in range(size // block):
            ox, oy = bx * block, by * block
            placed, tries = 0, 0
            while placed < 3 and tries < 50:
                tries += 1
                x, y = ox + rng.randint(1, block - 2), oy + rng.randint(1, block - 2)
                if not m.free(x - 1, y - 1, 3, 3) or (x, y) in pad_tiles:
                    continue
                if 185 <= x < 215 and 190 <= y < 210:
                    continue
                count += 1
                m.spawn(f"spawn {count}", x, y)
                placed += 1
    return m


def png(width, height, pixel):
    """A minimal RGBA PNG; pixel(x, y) -> (r, g, b, a)."""

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(
        b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def tile_pixel(x, y):
    edge = x % TILE_PX in (0, TILE_PX - 1) or y in (0, TILE_PX - 1)
    if x < TILE_PX:  # tile 1: wall
        return (70, 76, 92, 255) if edge else (104, 112, 134, 255)
    return (40, 120, 160, 255) if edge else (60, 170, 210, 255)  # tile 2: spare


def main():
    for name, build in (("courtyard.tmx", courtyard), ("metropolis.tmx", metropolis)):
        with open(os.path.join(HERE, name), "w", newline="\n") as f:
            f.write(build().tmx())
    with open(os.path.join(HERE, "tiles.png"), "wb") as f:
        f.write(png(2 * TILE_PX, TILE_PX, tile_pixel))


if __name__ == "__main__":
    main()
