// The golden vectors of crates/wire/tests/vectors, run as PROTOCOL.md's "Golden vectors"
// says a port should: ops encode to hex, hex decodes through the ops to their values, and
// every errors.json input fails with its named kind.
using System;
using System.Globalization;
using Tickwire.Wire;

namespace Tickwire.Tests
{
    static class WireVectorTests
    {
        static JsonValue Vectors(string file) { return Repo.Json("crates", "wire", "tests", "vectors", file); }

        static bool Signed(JsonValue op) { return op["min"].Text.StartsWith("-", StringComparison.Ordinal); }

        static uint F32Bits(JsonValue v) { return FloatBits.Single((float)v.AsDouble()); }

        static void Write(BitWriter w, JsonValue op)
        {
            switch (op["op"].AsString())
            {
                case "bits": w.WriteBits(op["value"].AsULong(), (int)op["bits"].AsLong()); break;
                case "bool": w.WriteBool(op["value"].Bool); break;
                case "uint": w.WriteUInt(op["value"].AsULong(), (int)op["bits"].AsLong()); break;
                case "range":
                    if (Signed(op)) w.WriteRange(op["value"].AsLong(), op["min"].AsLong(), op["max"].AsLong());
                    else w.WriteRangeUnsigned(op["value"].AsULong(), op["min"].AsULong(), op["max"].AsULong());
                    break;
                case "varint": w.WriteVarint(op["value"].AsULong()); break;
                case "varint_signed": w.WriteVarintSigned(op["value"].AsLong()); break;
                case "f32": w.WriteF32Bits(uint.Parse(op["bits"].AsString(), NumberStyles.HexNumber)); break;
                case "f64": w.WriteF64Bits(ulong.Parse(op["bits"].AsString(), NumberStyles.HexNumber)); break;
                case "quantized":
                    w.WriteQuantized((float)op["value"].AsDouble(), Grid(op));
                    break;
                case "len": w.WriteLength((int)op["value"].AsLong(), (int)op["max"].AsLong()); break;
                case "bytes":
                    var bytes = Hex.Decode(op["hex"].AsString());
                    w.WriteBytes(bytes, 0, bytes.Length, (int)op["max_len"].AsLong());
                    break;
                case "string": w.WriteString(op["value"].AsString(), (int)op["max_len"].AsLong()); break;
                case "raw_bytes":
                    var raw = Hex.Decode(op["hex"].AsString());
                    w.WriteRawBytes(raw, 0, raw.Length);
                    break;
                case "align": w.Align(); break;
                default: throw new InvalidOperationException("unknown op " + op["op"].Text);
            }
        }

        static Quantize Grid(JsonValue op)
        {
            return new Quantize(op["min"].AsDouble(), op["max"].AsDouble(), op["resolution"].AsDouble());
        }

        /// Reads one op; with <paramref name="check"/>, compares what it read with the op's value.
        static void Read(BitReader r, JsonValue op, bool check, string name)
        {
            string kind = op["op"].AsString();
            string what = name + " " + kind;
            switch (kind)
            {
                case "bits": { var v = r.ReadBits((int)op["bits"].AsLong()); if (check) Assert.Equal(op["value"].AsULong(), v, what); break; }
                case "bool": { var v = r.ReadBool(); if (check) Assert.Equal(op["value"].Bool, v, what); break; }
                case "uint": { var v = r.ReadUInt((int)op["bits"].AsLong()); if (check) Assert.Equal(op["value"].AsULong(), v, what); break; }
                case "range":
                    if (Signed(op)) { var v = r.ReadRange(op["min"].AsLong(), op["max"].AsLong()); if (check) Assert.Equal(op["value"].AsLong(), v, what); }
                    else { var v = r.ReadRangeUnsigned(op["min"].AsULong(), op["max"].AsULong()); if (check) Assert.Equal(op["value"].AsULong(), v, what); }
                    break;
                case "varint": { var v = r.ReadVarint(); if (check) Assert.Equal(op["value"].AsULong(), v, what); break; }
                case "varint_signed": { var v = r.ReadVarintSigned(); if (check) Assert.Equal(op["value"].AsLong(), v, what); break; }
                case "f32": { var v = r.ReadF32Bits(); if (check) Assert.Equal(uint.Parse(op["bits"].AsString(), NumberStyles.HexNumber), v, what); break; }
                case "f64": { var v = r.ReadBits(64); if (check) Assert.Equal(ulong.Parse(op["bits"].AsString(), NumberStyles.HexNumber), v, what); break; }
                case "quantized":
                    { var v = r.ReadQuantized(Grid(op)); if (check) Assert.Equal(F32Bits(op["decoded"]), FloatBits.Single(v), what + " (f32 bits)"); break; }
                case "len": { var v = r.ReadLength((int)op["max"].AsLong()); if (check) Assert.Equal((int)op["value"].AsLong(), v, what); break; }
                case "bytes": { var v = r.ReadBytes((int)op["max_len"].AsLong()); if (check) Assert.Equal(op["hex"].AsString(), Hex.Encode(v), what); break; }
                case "string": { var v = r.ReadString((int)op["max_len"].AsLong()); if (check) Assert.Equal(op["value"].AsString(), v, what); break; }
                case "raw_bytes":
                    {
                        var expected = Hex.Decode(op["hex"].AsString());
                        var v = new byte[expected.Length];
                        r.ReadRawBytes(v, 0, v.Length);
                        if (check) Assert.Equal(Hex.Encode(expected), Hex.Encode(v), what);
                        break;
                    }
                case "align": r.Align(); break;
                default: throw new InvalidOperationException("unknown op " + kind);
            }
        }

        static void EncodeAndDecode(JsonValue vector)
        {
            string name = vector["name"].AsString();
            var writer = new BitWriter(4);
            foreach (var op in vector["ops"].Items) Write(writer, op);
            Assert.Equal(vector["hex"].AsString(), Hex.Encode(writer.Buffer, 0, writer.ByteLength), name + " encoding");
            var reader = new BitReader(Hex.Decode(vector["hex"].AsString()));
            foreach (var op in vector["ops"].Items) Read(reader, op, true, name);
            reader.Finish();
        }

        [Test]
        public static void Primitives_encode_to_their_hex_and_decode_to_their_values()
        {
            var vectors = Vectors("primitives.json")["vectors"];
            Assert.True(vectors.Items.Count > 90, "primitives.json has its vectors");
            foreach (var vector in vectors.Items) EncodeAndDecode(vector);
        }

        [Test]
        public static void Composites_encode_through_their_ops_and_decode_back()
        {
            foreach (var vector in Vectors("composites.json")["vectors"].Items) EncodeAndDecode(vector);
        }

        [Test]
        public static void Every_error_vector_fails_with_its_kind_at_the_last_step()
        {
            foreach (var vector in Vectors("errors.json")["vectors"].Items)
            {
                string name = vector["name"].AsString();
                var reader = new BitReader(Hex.Decode(vector["hex"].AsString()));
                var ops = vector["ops"].Items;
                DecodeException failure = null;
                int failedAt = -1;
                for (int i = 0; i <= ops.Count && failure == null; i++)
                {
                    try
                    {
                        if (i < ops.Count) Read(reader, ops[i], false, name); else reader.Finish();
                    }
                    catch (DecodeException e) { failure = e; failedAt = i; }
                }
                Assert.True(failure != null, name + ": decoding succeeded, expected " + vector["error"].Text);
                Assert.True(failedAt >= ops.Count - 1, name + ": op " + failedAt + " failed early: " + failure.Message);
                Assert.Equal(vector["error"].AsString(), KindName(failure.Kind), name + " error kind");
            }
        }

        static string KindName(DecodeErrorKind kind)
        {
            switch (kind)
            {
                case DecodeErrorKind.Truncated: return "truncated";
                case DecodeErrorKind.OutOfRange: return "out_of_range";
                case DecodeErrorKind.TooLong: return "too_long";
                case DecodeErrorKind.InvalidUtf8: return "invalid_utf8";
                case DecodeErrorKind.InvalidVarint: return "invalid_varint";
                case DecodeErrorKind.NonZeroPadding: return "non_zero_padding";
                default: return "trailing_bytes";
            }
        }

        [Test]
        public static void The_seed_entity_from_protocol_md_encodes_by_hand()
        {
            var w = new BitWriter();
            w.WriteString("Casey", 32);
            foreach (var v in new[] { 100, 100, 50, 50, 75, 75 }) w.WriteRange(v, 0, 1000);
            w.WriteBool(false);
            Assert.Equal("c550d85c591e1964c820c3124b00", Hex.Encode(w.ToArray()), "seed entity");
        }

        [Test]
        public static void A_reused_reader_decodes_without_allocating()
        {
            var bytes = Hex.Decode("c550d85c591e1964c820c3124b00");
            var reader = new BitReader();
            var grid = new Quantize(-512, 512, 0.01);
            Action decode = () =>
            {
                reader.Reset(bytes, 0, bytes.Length);
                reader.ReadBits(6);
                reader.ReadRawBytes(bytes, 0, 0);
                for (int i = 0; i < 40; i++) reader.ReadBits(1);
                for (int i = 0; i < 6; i++) reader.ReadRange(0, 1000);
                reader.ReadBool();
                reader.Finish();
            };
            long allocated = Alloc.Measure(decode, 1000);
            Assert.Equal(0L, allocated, "bytes allocated by 1000 decodes");
            GC.KeepAlive(grid);
        }
    }
}

namespace Tickwire.Tests
{
    static class AllocTests
    {
        [Test]
        public static void The_allocation_meter_sees_an_allocation()
        {
            object sink = null;
            long allocated = Alloc.Measure(() => { sink = new byte[100]; }, 10);
            Assert.True(allocated >= 1000, "10 arrays of 100 bytes measured as " + allocated + " bytes");
            System.GC.KeepAlive(sink);
        }
    }
}
