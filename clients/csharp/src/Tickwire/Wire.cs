// The tickwire wire format (docs/PROTOCOL.md, "Wire encoding"): bit fields written least
// significant bit first, bounded integers, varints, quantized floats, strings and byte arrays.
// Held to the Rust encoder by crates/wire/tests/vectors (tests/WireVectorTests.cs).
using System;
using System.Text;

namespace Tickwire.Wire
{
    /// <summary>Why decoding failed; the names of PROTOCOL.md's "Decode errors".</summary>
    public enum DecodeErrorKind
    {
        /// <summary>The input ends before a field does.</summary>
        Truncated,
        /// <summary>A value exceeds its declared range, step count or variant count.</summary>
        OutOfRange,
        /// <summary>A length prefix exceeds its declared maximum.</summary>
        TooLong,
        /// <summary>A string's bytes are not UTF-8.</summary>
        InvalidUtf8,
        /// <summary>A varint is overlong or passes 2^64 - 1.</summary>
        InvalidVarint,
        /// <summary>Alignment bits or the final padding are not all zero.</summary>
        NonZeroPadding,
        /// <summary>8 or more bits remain after the message.</summary>
        TrailingBytes,
    }

    /// <summary>Bytes from the network that are not a valid message. Thrown only on bad input.</summary>
    public sealed class DecodeException : Exception
    {
        /// <summary>Which rule the input broke.</summary>
        public readonly DecodeErrorKind Kind;

        /// <summary>A decode failure of <paramref name="kind"/>.</summary>
        public DecodeException(DecodeErrorKind kind, string message) : base(message) { Kind = kind; }
    }

    /// <summary>A value the encoder refuses (out of its declared range, too long).</summary>
    public sealed class EncodeException : Exception
    {
        /// <summary>An encode failure.</summary>
        public EncodeException(string message) : base(message) { }
    }

    /// <summary>Widths of fields.</summary>
    public static class Bits
    {
        /// <summary>bits_for_span(s): the bits that hold every integer in 0..=s (0 for s = 0).</summary>
        public static int ForSpan(ulong span)
        {
            int bits = 0;
            while (span != 0) { bits++; span >>= 1; }
            return bits;
        }

        /// <summary>zigzag(v) = (v &lt;&lt; 1) XOR (v &gt;&gt; 63).</summary>
        public static ulong Zigzag(long value) { return (ulong)((value << 1) ^ (value >> 63)); }

        /// <summary>The inverse of <see cref="Zigzag"/>.</summary>
        public static long Unzigzag(ulong value) { return (long)(value >> 1) ^ -(long)(value & 1); }
    }

    /// <summary>
    /// Writes a message. Reuse one writer with <see cref="Reset"/>: it keeps its buffer, so
    /// encoding allocates nothing once the buffer has grown to the largest message.
    /// </summary>
    public sealed class BitWriter
    {
        byte[] _buffer;
        long _bitPosition;

        /// <summary>A writer with room for <paramref name="capacity"/> bytes before it grows.</summary>
        public BitWriter(int capacity = 256) { _buffer = new byte[Math.Max(capacity, 8)]; }

        /// <summary>Bits written so far.</summary>
        public long BitPosition { get { return _bitPosition; } }

        /// <summary>Bytes of the message so far: ceil(bits / 8).</summary>
        public int ByteLength { get { return (int)((_bitPosition + 7) >> 3); } }

        /// <summary>The buffer; the message is its first <see cref="ByteLength"/> bytes.</summary>
        public byte[] Buffer { get { return _buffer; } }

        /// <summary>Starts a new message in the same buffer.</summary>
        public void Reset()
        {
            Array.Clear(_buffer, 0, ByteLength);
            _bitPosition = 0;
        }

        /// <summary>The message as a new array (allocates; for tests and one-off messages).</summary>
        public byte[] ToArray()
        {
            var bytes = new byte[ByteLength];
            System.Buffer.BlockCopy(_buffer, 0, bytes, 0, bytes.Length);
            return bytes;
        }

        void Ensure(long bits)
        {
            long needed = (_bitPosition + bits + 7) >> 3;
            if (needed <= _buffer.Length) return;
            var grown = new byte[Math.Max(needed, (long)_buffer.Length * 2)];
            System.Buffer.BlockCopy(_buffer, 0, grown, 0, ByteLength);
            _buffer = grown;
        }

        /// <summary>The low <paramref name="bits"/> (0 to 64) of <paramref name="value"/>.</summary>
        public void WriteBits(ulong value, int bits)
        {
            if (bits < 0 || bits > 64) throw new ArgumentOutOfRangeException("bits");
            if (bits == 0) return;
            Ensure(bits);
            if (bits < 64) value &= (1UL << bits) - 1;
            long p = _bitPosition;
            int left = bits;
            while (left > 0)
            {
                int offset = (int)(p & 7);
                int take = Math.Min(8 - offset, left);
                _buffer[p >> 3] |= (byte)((value & ((1UL << take) - 1)) << offset);
                value >>= take;
                p += take;
                left -= take;
            }
            _bitPosition = p;
        }

        /// <summary>An unsigned integer of exactly <paramref name="bits"/> bits; refuses v &gt;= 2^bits.</summary>
        public void WriteUInt(ulong value, int bits)
        {
            if (bits < 64 && value >> bits != 0)
                throw new EncodeException("value " + value + " does not fit in " + bits + " bits");
            WriteBits(value, bits);
        }

        /// <summary>One bit.</summary>
        public void WriteBool(bool value) { WriteBits(value ? 1UL : 0UL, 1); }

        /// <summary>A ranged integer in min..=max, as its offset from min.</summary>
        public void WriteRange(long value, long min, long max)
        {
            if (value < min || value > max)
                throw new EncodeException("value " + value + " outside range " + min + "..=" + max);
            WriteBits(unchecked((ulong)(value - min)), Bits.ForSpan(unchecked((ulong)(max - min))));
        }

        /// <summary>A ranged unsigned integer in min..=max.</summary>
        public void WriteRangeUnsigned(ulong value, ulong min, ulong max)
        {
            if (value < min || value > max)
                throw new EncodeException("value " + value + " outside range " + min + "..=" + max);
            WriteBits(value - min, Bits.ForSpan(max - min));
        }

        /// <summary>A varint: 7-bit groups, least significant first, continuation bit 0x80.</summary>
        public void WriteVarint(ulong value)
        {
            while (value >= 0x80)
            {
                WriteBits((value & 0x7f) | 0x80, 8);
                value >>= 7;
            }
            WriteBits(value, 8);
        }

        /// <summary>A signed varint (zigzag, then varint).</summary>
        public void WriteVarintSigned(long value) { WriteVarint(Bits.Zigzag(value)); }

        /// <summary>An f32 as its IEEE 754 bit pattern.</summary>
        public void WriteF32(float value) { WriteBits(FloatBits.Single(value), 32); }

        /// <summary>An f32 given as its bit pattern (NaN payloads survive exactly).</summary>
        public void WriteF32Bits(uint bits) { WriteBits(bits, 32); }

        /// <summary>An f64 given as its bit pattern.</summary>
        public void WriteF64Bits(ulong bits) { WriteBits(bits, 64); }

        /// <summary>An f64 as its IEEE 754 bit pattern.</summary>
        public void WriteF64(double value) { WriteBits((ulong)BitConverter.DoubleToInt64Bits(value), 64); }

        /// <summary>A quantized float: the index of the nearest step of <paramref name="grid"/>.</summary>
        public void WriteQuantized(float value, Quantize grid) { WriteBits(grid.StepOf(value), grid.Bits); }

        /// <summary>A length prefix of bits_for_span(max) bits.</summary>
        public void WriteLength(int length, int max)
        {
            if (length < 0 || length > max) throw new EncodeException("length " + length + " exceeds max " + max);
            WriteBits((ulong)length, Bits.ForSpan((ulong)max));
        }

        /// <summary>A byte array of at most <paramref name="maxLength"/> bytes: length prefix, then bytes.</summary>
        public void WriteBytes(byte[] bytes, int offset, int count, int maxLength)
        {
            WriteLength(count, maxLength);
            WriteRawBytes(bytes, offset, count);
        }

        /// <summary>Bytes without a length prefix.</summary>
        public void WriteRawBytes(byte[] bytes, int offset, int count)
        {
            if ((_bitPosition & 7) == 0)
            {
                Ensure((long)count * 8);
                System.Buffer.BlockCopy(bytes, offset, _buffer, (int)(_bitPosition >> 3), count);
                _bitPosition += (long)count * 8;
                return;
            }
            for (int i = 0; i < count; i++) WriteBits(bytes[offset + i], 8);
        }

        /// <summary>A UTF-8 string of at most <paramref name="maxLength"/> bytes.</summary>
        public void WriteString(string value, int maxLength)
        {
            int count = Utf8.Strict.GetByteCount(value);
            if (count > maxLength) throw new EncodeException("string length " + count + " exceeds max " + maxLength);
            WriteLength(count, maxLength);
            Ensure((long)count * 8);
            if ((_bitPosition & 7) == 0)
            {
                Utf8.Strict.GetBytes(value, 0, value.Length, _buffer, (int)(_bitPosition >> 3));
                _bitPosition += (long)count * 8;
            }
            else
            {
                var bytes = Utf8.Strict.GetBytes(value);
                WriteRawBytes(bytes, 0, bytes.Length);
            }
        }

        /// <summary>Zero bits up to the next byte boundary.</summary>
        public void Align() { WriteBits(0, (int)((8 - (_bitPosition & 7)) & 7)); }
    }

    /// <summary>
    /// Reads a message. A reader is reusable (<see cref="Reset"/>) and allocates nothing except
    /// for strings and byte arrays it returns, and exceptions on bad input.
    /// </summary>
    public sealed class BitReader
    {
        byte[] _buffer;
        int _start;
        long _bitPosition;
        long _bitEnd;
        /// <summary>Where unaligned string bytes are gathered; made on first need.</summary>
        byte[] _scratch;

        /// <summary>An empty reader; call <see cref="Reset"/>.</summary>
        public BitReader() { _buffer = new byte[0]; }

        /// <summary>A reader over all of <paramref name="bytes"/>.</summary>
        public BitReader(byte[] bytes) { Reset(bytes, 0, bytes.Length); }

        /// <summary>Reads <paramref name="count"/> bytes of <paramref name="bytes"/> from <paramref name="offset"/>.</summary>
        public void Reset(byte[] bytes, int offset, int count)
        {
            if (offset < 0 || count < 0 || offset + count > bytes.Length) throw new ArgumentOutOfRangeException("count");
            _buffer = bytes;
            _start = offset;
            _bitPosition = 0;
            _bitEnd = (long)count * 8;
        }

        /// <summary>Bits not read yet.</summary>
        public long RemainingBits { get { return _bitEnd - _bitPosition; } }

        /// <summary>Bits read so far.</summary>
        public long BitPosition { get { return _bitPosition; } }

        void Need(long bits)
        {
            if (bits > RemainingBits)
                throw new DecodeException(DecodeErrorKind.Truncated,
                    "truncated: needed " + bits + " bits, " + RemainingBits + " remain");
        }

        /// <summary><paramref name="bits"/> (0 to 64) bits as an unsigned value.</summary>
        public ulong ReadBits(int bits)
        {
            if (bits < 0 || bits > 64) throw new ArgumentOutOfRangeException("bits");
            Need(bits);
            ulong value = 0;
            int shift = 0;
            long p = _bitPosition;
            int left = bits;
            while (left > 0)
            {
                int offset = (int)(p & 7);
                int take = Math.Min(8 - offset, left);
                ulong part = (ulong)((_buffer[_start + (p >> 3)] >> offset) & ((1 << take) - 1));
                value |= part << shift;
                shift += take;
                p += take;
                left -= take;
            }
            _bitPosition = p;
            return value;
        }

        /// <summary>An unsigned integer of <paramref name="bits"/> bits.</summary>
        public ulong ReadUInt(int bits) { return ReadBits(bits); }

        /// <summary>One bit.</summary>
        public bool ReadBool() { return ReadBits(1) != 0; }

        /// <summary>A ranged integer in min..=max.</summary>
        public long ReadRange(long min, long max)
        {
            ulong span = unchecked((ulong)(max - min));
            ulong offset = ReadBits(Bits.ForSpan(span));
            if (offset > span) throw new DecodeException(DecodeErrorKind.OutOfRange, "value offset " + offset + " exceeds span " + span);
            return unchecked(min + (long)offset);
        }

        /// <summary>A ranged unsigned integer in min..=max.</summary>
        public ulong ReadRangeUnsigned(ulong min, ulong max)
        {
            ulong span = max - min;
            ulong offset = ReadBits(Bits.ForSpan(span));
            if (offset > span) throw new DecodeException(DecodeErrorKind.OutOfRange, "value offset " + offset + " exceeds span " + span);
            return min + offset;
        }

        /// <summary>A varint (1 to 10 groups), refusing overlong forms and values past 2^64 - 1.</summary>
        public ulong ReadVarint()
        {
            ulong value = 0;
            for (int group = 0; group < 10; group++)
            {
                ulong b = ReadBits(8);
                ulong payload = b & 0x7f;
                if (group == 9 && (payload > 1 || (b & 0x80) != 0))
                    throw new DecodeException(DecodeErrorKind.InvalidVarint, "varint passes 2^64 - 1");
                value |= payload << (7 * group);
                if ((b & 0x80) == 0)
                {
                    if (group > 0 && payload == 0) throw new DecodeException(DecodeErrorKind.InvalidVarint, "overlong varint");
                    return value;
                }
            }
            throw new DecodeException(DecodeErrorKind.InvalidVarint, "varint longer than 10 groups");
        }

        /// <summary>A varint narrowed to <paramref name="max"/> (out_of_range past it).</summary>
        public ulong ReadVarint(ulong max)
        {
            ulong value = ReadVarint();
            if (value > max) throw new DecodeException(DecodeErrorKind.OutOfRange, "varint " + value + " exceeds " + max);
            return value;
        }

        /// <summary>A zigzag varint.</summary>
        public long ReadVarintSigned() { return Bits.Unzigzag(ReadVarint()); }

        /// <summary>A raw f32.</summary>
        public float ReadF32() { return FloatBits.Single((uint)ReadBits(32)); }

        /// <summary>A raw f32's bit pattern.</summary>
        public uint ReadF32Bits() { return (uint)ReadBits(32); }

        /// <summary>A raw f64.</summary>
        public double ReadF64() { return BitConverter.Int64BitsToDouble((long)ReadBits(64)); }

        /// <summary>A quantized float on <paramref name="grid"/>.</summary>
        public float ReadQuantized(Quantize grid) { return grid.ValueAt(ReadBits(grid.Bits)); }

        /// <summary>The step index of a quantized float, checked against the grid.</summary>
        public ulong ReadQuantizedStep(Quantize grid)
        {
            ulong step = ReadBits(grid.Bits);
            if (step > grid.LastStep) throw new DecodeException(DecodeErrorKind.OutOfRange, "step " + step + " exceeds top step " + grid.LastStep);
            return step;
        }

        /// <summary>A length prefix for at most <paramref name="max"/>.</summary>
        public int ReadLength(int max)
        {
            ulong length = ReadBits(Bits.ForSpan((ulong)max));
            if (length > (ulong)max) throw new DecodeException(DecodeErrorKind.TooLong, "length " + length + " exceeds max " + max);
            return (int)length;
        }

        /// <summary>A byte array of at most <paramref name="maxLength"/> bytes (allocates it).</summary>
        public byte[] ReadBytes(int maxLength)
        {
            int length = ReadLength(maxLength);
            Need((long)length * 8);
            var bytes = new byte[length];
            ReadRawBytes(bytes, 0, length);
            return bytes;
        }

        /// <summary><paramref name="count"/> bytes without a prefix, into <paramref name="into"/>.</summary>
        public void ReadRawBytes(byte[] into, int offset, int count)
        {
            Need((long)count * 8);
            if ((_bitPosition & 7) == 0)
            {
                System.Buffer.BlockCopy(_buffer, _start + (int)(_bitPosition >> 3), into, offset, count);
                _bitPosition += (long)count * 8;
                return;
            }
            for (int i = 0; i < count; i++) into[offset + i] = (byte)ReadBits(8);
        }

        /// <summary>A UTF-8 string of at most <paramref name="maxLength"/> bytes.</summary>
        public string ReadString(int maxLength)
        {
            int length = ReadLength(maxLength);
            Need((long)length * 8);
            byte[] bytes;
            int offset;
            if ((_bitPosition & 7) == 0)
            {
                bytes = _buffer;
                offset = _start + (int)(_bitPosition >> 3);
                _bitPosition += (long)length * 8;
            }
            else
            {
                // Unaligned bytes are gathered in a scratch buffer the reader keeps, so the
                // string is the only allocation.
                if (_scratch == null || _scratch.Length < length) _scratch = new byte[Math.Max(length, 32)];
                bytes = _scratch;
                offset = 0;
                ReadRawBytes(bytes, 0, length);
            }
            try
            {
                return Utf8.Strict.GetString(bytes, offset, length);
            }
            catch (ArgumentException)
            {
                throw new DecodeException(DecodeErrorKind.InvalidUtf8, "string is not valid UTF-8");
            }
        }

        /// <summary>Skips to the next byte boundary; the skipped bits must be zero.</summary>
        public void Align()
        {
            int bits = (int)((8 - (_bitPosition & 7)) & 7);
            if (ReadBits(bits) != 0) throw new DecodeException(DecodeErrorKind.NonZeroPadding, "non-zero alignment bits");
        }

        /// <summary>The end-of-message checks: fewer than 8 bits left, all zero.</summary>
        public void Finish()
        {
            long left = RemainingBits;
            if (left >= 8) throw new DecodeException(DecodeErrorKind.TrailingBytes, left / 8 + " trailing bytes");
            if (ReadBits((int)left) != 0) throw new DecodeException(DecodeErrorKind.NonZeroPadding, "non-zero padding");
        }
    }

    /// <summary>
    /// A quantization grid for f32 values: min..=max in steps of resolution (PROTOCOL.md,
    /// "Quantized floats"), computed in doubles exactly as the Rust and TypeScript code do.
    /// </summary>
    public sealed class Quantize
    {
        /// <summary>The smallest value (min rounded to f32).</summary>
        public readonly double Min;
        /// <summary>The largest value (max rounded to f32).</summary>
        public readonly double Max;
        /// <summary>Distance between steps.</summary>
        public readonly double Resolution;
        /// <summary>Index of the top step.</summary>
        public readonly ulong LastStep;
        /// <summary>Bits per value, 0 to 33.</summary>
        public readonly int Bits;

        /// <summary>A grid; throws ArgumentException for one the Rust derive refuses.</summary>
        public Quantize(double min, double max, double resolution)
        {
            Min = (double)(float)min;
            Max = (double)(float)max;
            if (double.IsNaN(Min) || double.IsInfinity(Min) || double.IsNaN(Max) || double.IsInfinity(Max) || !(Min < Max))
                throw new ArgumentException("quantize: min " + min + " must be below max " + max + " and both finite");
            if (!(resolution > 0) || double.IsInfinity(resolution))
                throw new ArgumentException("quantize: resolution " + resolution + " must be positive");
            if (resolution < Math.Max(Math.Abs(Min), Math.Abs(Max)) / 4194304.0)
                throw new ArgumentException("quantize: resolution " + resolution + " is finer than f32 precision");
            double span = (Max - Min) / resolution + 0.5;
            if (span > 4294967296.0) throw new ArgumentException("quantize: more than 2^32 steps");
            Resolution = resolution;
            LastStep = (ulong)Math.Truncate(span);
            Bits = Wire.Bits.ForSpan(LastStep);
        }

        /// <summary>The step nearest to <paramref name="value"/>; refuses NaN and values outside the grid.</summary>
        public ulong StepOf(float value)
        {
            double v = value;
            if (!(v >= Min && v <= Max)) throw new EncodeException("value " + v + " outside quantization range " + Min + "..=" + Max);
            double step = Math.Round((v - Min) / Resolution, MidpointRounding.AwayFromZero);
            return Math.Min((ulong)step, LastStep);
        }

        /// <summary>The f32 value of <paramref name="step"/>; out_of_range past the top step.</summary>
        public float ValueAt(ulong step)
        {
            if (step > LastStep) throw new DecodeException(DecodeErrorKind.OutOfRange, "step " + step + " exceeds top step " + LastStep);
            return (float)Math.Min(Min + step * Resolution, Max);
        }
    }

    /// <summary>
    /// f32 bit patterns without BitConverter.SingleToInt32Bits (not in .NET Standard 2.0) and
    /// without unsafe code (an asmdef then needs no "allow unsafe"): an explicit-layout union.
    /// </summary>
    public static class FloatBits
    {
        [System.Runtime.InteropServices.StructLayout(System.Runtime.InteropServices.LayoutKind.Explicit)]
        struct Union
        {
            [System.Runtime.InteropServices.FieldOffset(0)] public float F;
            [System.Runtime.InteropServices.FieldOffset(0)] public uint U;
        }

        /// <summary>The IEEE 754 bits of <paramref name="value"/>.</summary>
        public static uint Single(float value) { var u = new Union(); u.F = value; return u.U; }

        /// <summary>The f32 whose bits are <paramref name="bits"/>.</summary>
        public static float Single(uint bits) { var u = new Union(); u.U = bits; return u.F; }
    }

    /// <summary>Strict UTF-8: throws on invalid bytes, no byte order mark.</summary>
    public static class Utf8
    {
        /// <summary>The shared strict encoding.</summary>
        public static readonly UTF8Encoding Strict = new UTF8Encoding(false, true);
    }
}
