// The arena's golden vectors (crates/arena/tests/vectors): snapshots decoded in order with one
// decoder, server messages decoded, client messages and inputs encoded to the Rust bytes.
using System;
using System.Linq;
using Tickwire.Arena;
using Tickwire.Wire;

namespace Tickwire.Tests
{
    static class ArenaVectorTests
    {
        static JsonValue Vectors(string file) { return Repo.Json("crates", "arena", "tests", "vectors", file); }

        static string Ids(ushort[] ids, int count) { return string.Join(",", ids.Take(count)); }

        static string Json(JsonValue array) { return string.Join(",", array.Items.Select(v => v.Text)); }

        [Test]
        public static void Snapshots_decode_in_order_to_the_rust_views()
        {
            var file = Vectors("snapshots.json");
            var schema = file["schema"];
            var decoder = new SnapshotDecoder(
                new SnapshotSchema((float)schema["map_width"].AsDouble(), (float)schema["map_height"].AsDouble(), (int)schema["max_health"].AsLong()),
                (int)schema["history"].AsLong());
            int decodedCount = 0;
            foreach (var vector in file["vectors"].Items)
            {
                string name = vector["name"].AsString();
                var expected = vector["decoded"];
                var bytes = Hex.Decode(vector["hex"].AsString());
                var s = decoder.Decode(bytes, 0, bytes.Length);
                Assert.Equal(expected["tick"].AsLong(), (long)s.Tick, name + " tick");
                Assert.Equal(expected["baseline"].IsNull ? -1 : expected["baseline"].AsLong(), s.Baseline, name + " baseline");
                Assert.Equal(expected["last_input"].IsNull ? -1 : (int)expected["last_input"].AsLong(), s.LastInput, name + " last_input");
                var me = expected["me"];
                Assert.Equal(me["alive"].Bool, s.Me.Alive, name + " me.alive");
                Assert.Equal((uint)me["x_bits"].AsLong(), FloatBits.Single(s.Me.X), name + " me.x bits");
                Assert.Equal((uint)me["y_bits"].AsLong(), FloatBits.Single(s.Me.Y), name + " me.y bits");
                Assert.Equal((int)me["aim"].AsLong(), (int)s.Me.Aim, name + " me.aim");
                Assert.Equal((int)me["health"].AsLong(), (int)s.Me.Health, name + " me.health");
                Assert.Equal((uint)me["respawn_in"].AsLong(), s.Me.RespawnIn, name + " me.respawn_in");
                Assert.Equal((uint)me["kills"].AsLong(), s.Me.Kills, name + " me.kills");
                Assert.Equal((uint)me["deaths"].AsLong(), s.Me.Deaths, name + " me.deaths");
                Assert.Equal((uint)me["score"].AsLong(), s.Me.Score, name + " me.score");
                Assert.Equal(Json(expected["destroyed"]), Ids(s.Destroyed, s.DestroyedCount), name + " destroyed");
                Assert.Equal(Json(expected["created"]), Ids(s.Created, s.CreatedCount), name + " created");
                Assert.Equal(Json(expected["updated"]), Ids(s.Updated, s.UpdatedCount), name + " updated");
                var entities = expected["entities"].Items;
                Assert.Equal(entities.Count, s.EntityCount, name + " entities");
                for (int i = 0; i < entities.Count; i++)
                {
                    var e = s.Entities[i];
                    string got = e.Id + "," + e.X + "," + e.Y + "," + e.Aim + "," + e.Health + "," + (e.Alive ? "true" : "false");
                    string want = string.Join(",", entities[i].Items.Select(v => v.Kind == JsonKind.Bool ? (v.Bool ? "true" : "false") : v.Text));
                    Assert.Equal(want, got, name + " entity " + i);
                }
                var bullets = expected["bullets"].Items;
                Assert.Equal(bullets.Count, s.BulletCount, name + " bullets");
                for (int i = 0; i < bullets.Count; i++)
                {
                    var b = s.Bullets[i];
                    string got = b.X + "," + b.Y + "," + b.Direction + "," + (b.Mine ? "true" : "false");
                    string want = string.Join(",", bullets[i].Items.Select(v => v.Kind == JsonKind.Bool ? (v.Bool ? "true" : "false") : v.Text));
                    Assert.Equal(want, got, name + " bullet " + i);
                }
                Assert.Equal(s.Tick, (uint)decoder.Newest, name + " newest");
                decodedCount++;
            }
            Assert.Equal(5, decodedCount, "snapshot vectors decoded");
        }

        [Test]
        public static void A_delta_against_a_tick_not_held_is_refused_as_unknown_baseline()
        {
            var file = Vectors("snapshots.json");
            var schema = file["schema"];
            var decoder = new SnapshotDecoder(new SnapshotSchema(40, 30, 100), 32);
            var delta = Hex.Decode(file["vectors"][1]["hex"].AsString());
            var error = Assert.Throws<SnapshotException>(() => decoder.Decode(delta, 0, delta.Length), "a delta first");
            Assert.True(error.UnknownBaseline, "the error says the baseline is unknown: " + error.Message);
            GC.KeepAlive(schema);
        }

        [Test]
        public static void Decoding_snapshots_allocates_nothing()
        {
            var file = Vectors("snapshots.json");
            var decoder = new SnapshotDecoder(new SnapshotSchema(40, 30, 100), 32);
            var all = file["vectors"].Items.Select(v => Hex.Decode(v["hex"].AsString())).ToArray();
            var interpolation = new Interpolation(decoder.Schema);
            Action decodeAll = () =>
            {
                foreach (var bytes in all) interpolation.Push(decoder.Decode(bytes, 0, bytes.Length));
                float x, y, aim;
                interpolation.TrySample(1, 2.5, out x, out y, out aim);
            };
            long allocated = Alloc.Measure(decodeAll, 200);
            Assert.Equal(0L, allocated, "bytes allocated decoding 1000 snapshots");
        }

        [Test]
        public static void Interpolation_samples_between_snapshots()
        {
            var file = Vectors("snapshots.json");
            var decoder = new SnapshotDecoder(new SnapshotSchema(40, 30, 100), 32);
            var interpolation = new Interpolation(decoder.Schema);
            foreach (var v in file["vectors"].Items.Take(2))
            {
                var bytes = Hex.Decode(v["hex"].AsString());
                interpolation.Push(decoder.Decode(bytes, 0, bytes.Length));
            }
            // Entity 1 is at x step 515 on tick 1 and 522 on tick 2.
            float x, y, aim;
            Assert.True(interpolation.TrySample(1, 1.5, out x, out y, out aim), "entity 1 sampled");
            Assert.Equal((515 + 522) / 2.0 / 64, (double)x, "x halfway");
            Assert.True(interpolation.TrySample(1, 9, out x, out y, out aim), "past the newest");
            Assert.Equal(522 / 64.0, (double)x, "x held at the newest");
            Assert.True(!interpolation.TrySample(999, 1.5, out x, out y, out aim), "an unknown entity");
            Assert.True(Math.Abs(Interpolation.LerpAngle(3.0f, -3.0f, 0.5f)) > 3.1, "angles interpolate the short way round");
        }

        [Test]
        public static void Server_messages_decode_to_the_rust_values()
        {
            foreach (var vector in Vectors("messages.json")["server_messages"].Items)
            {
                string name = vector["name"].AsString();
                var bytes = Hex.Decode(vector["hex"].AsString());
                var m = ServerMessage.Decode(bytes, 0, bytes.Length);
                var want = vector["message"];
                Assert.Equal(want["type"].AsString(), m.Type.ToString(), name + " type");
                switch (m.Type)
                {
                    case ServerMessageType.Welcome:
                        Assert.Equal((int)want["protocol"].AsLong(), (int)m.Protocol, name + " protocol");
                        Assert.Equal((int)want["you"].AsLong(), (int)m.Id, name + " you");
                        Assert.Equal(want["map"].AsString(), m.Text, name + " map");
                        Assert.Equal((uint)want["map_width_bits"].AsLong(), FloatBits.Single(m.MapWidth), name + " map_width");
                        Assert.Equal((uint)want["map_height_bits"].AsLong(), FloatBits.Single(m.MapHeight), name + " map_height");
                        Assert.Equal((int)want["tick_rate_hz"].AsLong(), (int)m.TickRateHz, name + " tick rate");
                        Assert.Equal((uint)want["tick"].AsLong(), m.Tick, name + " tick");
                        Assert.Equal((int)want["max_health"].AsLong(), (int)m.MaxHealth, name + " max_health");
                        Assert.Equal((uint)want["max_speed_bits"].AsLong(), FloatBits.Single(m.MaxSpeed), name + " max_speed");
                        Assert.Equal((uint)want["player_radius_bits"].AsLong(), FloatBits.Single(m.PlayerRadius), name + " radius");
                        Assert.Equal((int)want["snapshot_history"].AsLong(), (int)m.SnapshotHistory, name + " history");
                        break;
                    case ServerMessageType.Kill:
                        Assert.Equal(want["killer"].Text + "/" + want["victim"].Text, m.From + "/" + m.Victim, name);
                        break;
                    case ServerMessageType.Hit:
                        Assert.Equal(want["attacker"].Text + "/" + want["victim"].Text + "/" + want["damage"].Text + "/" + want["health"].Text,
                            m.From + "/" + m.Victim + "/" + m.Damage + "/" + m.Health, name);
                        break;
                    case ServerMessageType.Respawn:
                        Assert.Equal(want["x_bits"].Text + "/" + want["y_bits"].Text, FloatBits.Single(m.X) + "/" + FloatBits.Single(m.Y), name);
                        break;
                    case ServerMessageType.Teleported:
                        Assert.Equal(want["teleport"].Text + "/" + want["x_bits"].Text + "/" + want["y_bits"].Text,
                            m.From + "/" + FloatBits.Single(m.X) + "/" + FloatBits.Single(m.Y), name);
                        break;
                    case ServerMessageType.Chat:
                        Assert.Equal(want["from"].Text + "/" + want["text"].AsString(), m.From + "/" + m.Text, name);
                        break;
                    case ServerMessageType.Announcement:
                        Assert.Equal(want["text"].AsString(), m.Text, name);
                        break;
                    case ServerMessageType.Pong:
                        Assert.Equal(want["nonce"].Text + "/" + want["tick"].Text, m.Nonce + "/" + m.Tick, name);
                        break;
                    case ServerMessageType.Player:
                        Assert.Equal(want["id"].Text + "/" + want["name"].AsString(), m.Id + "/" + m.Text, name);
                        break;
                    case ServerMessageType.Left:
                        Assert.Equal(want["id"].Text, m.Id.ToString(), name);
                        break;
                    default:
                        string wantScores = string.Join(";", want["scores"].Items.Select(line => Json(line)));
                        string gotScores = string.Join(";", m.Scores.Select(l => l.Id + "," + l.Kills + "," + l.Deaths + "," + l.Score));
                        Assert.Equal(wantScores, gotScores, name);
                        break;
                }
            }
        }

        [Test]
        public static void Client_messages_encode_to_the_rust_bytes()
        {
            foreach (var vector in Vectors("messages.json")["client_messages"].Items)
            {
                var want = vector["message"];
                byte[] bytes = want["type"].AsString() == "Chat"
                    ? ClientMessages.Chat(want["text"].AsString())
                    : ClientMessages.Ping((uint)want["nonce"].AsLong());
                Assert.Equal(vector["hex"].AsString(), Hex.Encode(bytes), vector["name"].AsString());
            }
        }

        static InputCommand Command(JsonValue v, bool fromBits)
        {
            return new InputCommand
            {
                Sequence = (ushort)v["sequence"].AsLong(),
                MoveX = fromBits ? FloatBits.Single((uint)v["move_x_bits"].AsLong()) : (float)v["move_x"].AsDouble(),
                MoveY = fromBits ? FloatBits.Single((uint)v["move_y_bits"].AsLong()) : (float)v["move_y"].AsDouble(),
                Aim = fromBits ? FloatBits.Single((uint)v["aim_bits"].AsLong()) : (float)v["aim"].AsDouble(),
                Buttons = (Buttons)v["buttons"].AsLong(),
            };
        }

        [Test]
        public static void Inputs_encode_to_the_rust_bytes()
        {
            var file = Vectors("input.json");
            var w = new BitWriter();
            foreach (var vector in file["commands"].Items)
            {
                w.Reset();
                Command(vector["given"], false).Write(w);
                Assert.Equal(vector["hex"].AsString(), Hex.Encode(w.ToArray()), vector["name"].AsString());
            }
            foreach (var vector in file["client_inputs"].Items)
            {
                var commands = vector["inputs"].Items.Select(c => Command(c, true)).ToArray();
                long ack = vector["ack"].IsNull ? -1 : vector["ack"].AsLong();
                var bytes = InputSender.Encode(ack, commands, commands.Length, w);
                Assert.Equal(vector["hex"].AsString(), Hex.Encode(bytes.Array, bytes.Offset, bytes.Count), vector["name"].AsString());
            }
        }
    }
}
