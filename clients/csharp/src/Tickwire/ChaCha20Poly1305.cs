// ChaCha20-Poly1305, the IETF AEAD of RFC 8439, in plain C#: no native plugin and no
// System.Security.Cryptography class (.NET Standard 2.0 has none for it, and Unity's IL2CPP,
// WebGL and console targets ship no libsodium), so it runs wherever C# runs. Tested against
// RFC 8439's vectors (tests/CryptoTests.cs) and, end to end, against tickwire's server (ring).
// Allocation-free once constructed; not safe to share between threads.
using System;
using Tickwire.Protocol;

namespace Tickwire.Crypto
{
    /// <summary>
    /// The AEAD with one 32-byte key: 12-byte nonce, 16-byte tag appended to the ciphertext.
    /// </summary>
    public sealed class ChaCha20Poly1305
    {
        /// <summary>Bytes of a key.</summary>
        public const int KeyBytes = 32;
        /// <summary>Bytes of a nonce.</summary>
        public const int NonceBytes = 12;
        /// <summary>Bytes of the tag.</summary>
        public const int TagBytes = 16;

        readonly uint[] _key = new uint[8];
        readonly uint[] _state = new uint[16];
        readonly uint[] _working = new uint[16];
        readonly byte[] _block = new byte[64];
        readonly byte[] _nonce = new byte[NonceBytes];
        readonly byte[] _tag = new byte[TagBytes];
        readonly Poly1305 _poly = new Poly1305();

        /// <summary>An AEAD under <paramref name="key"/> (32 bytes from <paramref name="offset"/>).</summary>
        public ChaCha20Poly1305(byte[] key, int offset = 0)
        {
            if (key == null || key.Length - offset < KeyBytes) throw new ArgumentException("key must be 32 bytes");
            for (int i = 0; i < 8; i++) _key[i] = LittleEndian.U32(key, offset + 4 * i);
        }

        /// <summary>
        /// The nonce tickwire's packets use: 4 zero bytes, then <paramref name="sequence"/> as 8
        /// bytes little-endian. Returns a buffer the instance owns.
        /// </summary>
        public byte[] SequenceNonce(ulong sequence)
        {
            _nonce[0] = _nonce[1] = _nonce[2] = _nonce[3] = 0;
            for (int i = 0; i < 8; i++) _nonce[4 + i] = (byte)(sequence >> (8 * i));
            return _nonce;
        }

        /// <summary>
        /// Encrypts <paramref name="length"/> bytes of <paramref name="plain"/> into
        /// <paramref name="output"/> and appends the tag (length + 16 bytes written). In place
        /// is allowed (the same array and offset).
        /// </summary>
        public void Seal(byte[] nonce, byte[] aad, int aadOffset, int aadLength,
            byte[] plain, int plainOffset, int length, byte[] output, int outputOffset)
        {
            Begin(nonce);
            Xor(plain, plainOffset, length, output, outputOffset);
            Authenticate(aad, aadOffset, aadLength, output, outputOffset, length);
            Buffer.BlockCopy(_tag, 0, output, outputOffset + length, TagBytes);
        }

        /// <summary>
        /// Checks the tag of <paramref name="sealedLength"/> bytes (ciphertext and tag) and, if it
        /// authenticates, decrypts sealedLength - 16 bytes into <paramref name="output"/>.
        /// False (and nothing written) when it does not. In place is allowed.
        /// </summary>
        public bool Open(byte[] nonce, byte[] aad, int aadOffset, int aadLength,
            byte[] sealedBytes, int sealedOffset, int sealedLength, byte[] output, int outputOffset)
        {
            int length = sealedLength - TagBytes;
            if (length < 0) return false;
            Begin(nonce);
            Authenticate(aad, aadOffset, aadLength, sealedBytes, sealedOffset, length);
            int diff = 0;
            for (int i = 0; i < TagBytes; i++) diff |= _tag[i] ^ sealedBytes[sealedOffset + length + i];
            if (diff != 0) return false;
            Xor(sealedBytes, sealedOffset, length, output, outputOffset);
            return true;
        }

        /// <summary>Sets up the state for <paramref name="nonce"/> and keys Poly1305 from block 0.</summary>
        void Begin(byte[] nonce)
        {
            if (nonce == null || nonce.Length < NonceBytes) throw new ArgumentException("nonce must be 12 bytes");
            _state[0] = 0x61707865; _state[1] = 0x3320646e; _state[2] = 0x79622d32; _state[3] = 0x6b206574;
            for (int i = 0; i < 8; i++) _state[4 + i] = _key[i];
            _state[12] = 0;
            _state[13] = LittleEndian.U32(nonce, 0);
            _state[14] = LittleEndian.U32(nonce, 4);
            _state[15] = LittleEndian.U32(nonce, 8);
            Block();
            _poly.Init(_block);
            _state[12] = 1;
        }

        void Authenticate(byte[] aad, int aadOffset, int aadLength, byte[] cipher, int cipherOffset, int length)
        {
            _poly.UpdatePadded(aad, aadOffset, aadLength);
            _poly.UpdatePadded(cipher, cipherOffset, length);
            _poly.UpdateLengths((ulong)aadLength, (ulong)length);
            _poly.Finish(_tag);
        }

        /// <summary>The keystream from counter 1 XORed into output.</summary>
        void Xor(byte[] input, int inputOffset, int length, byte[] output, int outputOffset)
        {
            for (int done = 0; done < length; done += 64)
            {
                Block();
                _state[12]++;
                int n = Math.Min(64, length - done);
                for (int i = 0; i < n; i++) output[outputOffset + done + i] = (byte)(input[inputOffset + done + i] ^ _block[i]);
            }
        }

        /// <summary>One ChaCha20 block of the current state into _block.</summary>
        void Block()
        {
            uint[] x = _working;
            Array.Copy(_state, x, 16);
            for (int round = 0; round < 10; round++)
            {
                Quarter(x, 0, 4, 8, 12); Quarter(x, 1, 5, 9, 13); Quarter(x, 2, 6, 10, 14); Quarter(x, 3, 7, 11, 15);
                Quarter(x, 0, 5, 10, 15); Quarter(x, 1, 6, 11, 12); Quarter(x, 2, 7, 8, 13); Quarter(x, 3, 4, 9, 14);
            }
            for (int i = 0; i < 16; i++)
            {
                uint v = x[i] + _state[i];
                _block[4 * i] = (byte)v;
                _block[4 * i + 1] = (byte)(v >> 8);
                _block[4 * i + 2] = (byte)(v >> 16);
                _block[4 * i + 3] = (byte)(v >> 24);
            }
        }

        static void Quarter(uint[] x, int a, int b, int c, int d)
        {
            x[a] += x[b]; x[d] = Rotl(x[d] ^ x[a], 16);
            x[c] += x[d]; x[b] = Rotl(x[b] ^ x[c], 12);
            x[a] += x[b]; x[d] = Rotl(x[d] ^ x[a], 8);
            x[c] += x[d]; x[b] = Rotl(x[b] ^ x[c], 7);
        }

        static uint Rotl(uint v, int n) { return (v << n) | (v >> (32 - n)); }

        /// <summary>ChaCha20 alone (RFC 8439 2.4): XORs the keystream from <paramref name="counter"/>. For tests.</summary>
        public void ChaCha20(byte[] nonce, uint counter, byte[] data, int offset, int length)
        {
            Begin(nonce);
            _state[12] = counter;
            Xor(data, offset, length, data, offset);
        }
    }

    /// <summary>
    /// Poly1305 (RFC 8439 2.5) with 26-bit limbs in 64-bit products, the layout of
    /// poly1305-donna-32. Messages are fed as zero-padded 16-byte blocks, which is all the AEAD
    /// needs; <see cref="Mac"/> handles a message of any length.
    /// </summary>
    public sealed class Poly1305
    {
        uint _r0, _r1, _r2, _r3, _r4, _s1, _s2, _s3, _s4;
        uint _h0, _h1, _h2, _h3, _h4;
        uint _pad0, _pad1, _pad2, _pad3;
        readonly byte[] _last = new byte[16];

        /// <summary>Keys the MAC with 32 bytes: r (clamped), then s.</summary>
        public void Init(byte[] key)
        {
            uint t0 = LittleEndian.U32(key, 0), t1 = LittleEndian.U32(key, 4);
            uint t2 = LittleEndian.U32(key, 8), t3 = LittleEndian.U32(key, 12);
            _r0 = t0 & 0x3ffffff;
            _r1 = ((t0 >> 26) | (t1 << 6)) & 0x3ffff03;
            _r2 = ((t1 >> 20) | (t2 << 12)) & 0x3ffc0ff;
            _r3 = ((t2 >> 14) | (t3 << 18)) & 0x3f03fff;
            _r4 = (t3 >> 8) & 0x00fffff;
            _s1 = _r1 * 5; _s2 = _r2 * 5; _s3 = _r3 * 5; _s4 = _r4 * 5;
            _h0 = _h1 = _h2 = _h3 = _h4 = 0;
            _pad0 = LittleEndian.U32(key, 16); _pad1 = LittleEndian.U32(key, 20);
            _pad2 = LittleEndian.U32(key, 24); _pad3 = LittleEndian.U32(key, 28);
        }

        /// <summary>Bytes as 16-byte blocks, the last zero-padded to 16 (a full block).</summary>
        public void UpdatePadded(byte[] data, int offset, int length)
        {
            int full = length & ~15;
            for (int i = 0; i < full; i += 16) BlockAt(data, offset + i, 1u << 24);
            int rest = length - full;
            if (rest > 0)
            {
                Array.Clear(_last, 0, 16);
                Buffer.BlockCopy(data, offset + full, _last, 0, rest);
                BlockAt(_last, 0, 1u << 24);
            }
        }

        /// <summary>The AEAD's final block: both lengths as u64 little-endian.</summary>
        public void UpdateLengths(ulong aadLength, ulong cipherLength)
        {
            for (int i = 0; i < 8; i++)
            {
                _last[i] = (byte)(aadLength >> (8 * i));
                _last[8 + i] = (byte)(cipherLength >> (8 * i));
            }
            BlockAt(_last, 0, 1u << 24);
        }

        void BlockAt(byte[] m, int i, uint hibit)
        {
            uint t0 = LittleEndian.U32(m, i), t1 = LittleEndian.U32(m, i + 4);
            uint t2 = LittleEndian.U32(m, i + 8), t3 = LittleEndian.U32(m, i + 12);
            _h0 += t0 & 0x3ffffff;
            _h1 += ((t0 >> 26) | (t1 << 6)) & 0x3ffffff;
            _h2 += ((t1 >> 20) | (t2 << 12)) & 0x3ffffff;
            _h3 += ((t2 >> 14) | (t3 << 18)) & 0x3ffffff;
            _h4 += (t3 >> 8) | hibit;

            ulong d0 = (ulong)_h0 * _r0 + (ulong)_h1 * _s4 + (ulong)_h2 * _s3 + (ulong)_h3 * _s2 + (ulong)_h4 * _s1;
            ulong d1 = (ulong)_h0 * _r1 + (ulong)_h1 * _r0 + (ulong)_h2 * _s4 + (ulong)_h3 * _s3 + (ulong)_h4 * _s2;
            ulong d2 = (ulong)_h0 * _r2 + (ulong)_h1 * _r1 + (ulong)_h2 * _r0 + (ulong)_h3 * _s4 + (ulong)_h4 * _s3;
            ulong d3 = (ulong)_h0 * _r3 + (ulong)_h1 * _r2 + (ulong)_h2 * _r1 + (ulong)_h3 * _r0 + (ulong)_h4 * _s4;
            ulong d4 = (ulong)_h0 * _r4 + (ulong)_h1 * _r3 + (ulong)_h2 * _r2 + (ulong)_h3 * _r1 + (ulong)_h4 * _r0;

            ulong c = d0 >> 26; _h0 = (uint)d0 & 0x3ffffff;
            d1 += c; c = d1 >> 26; _h1 = (uint)d1 & 0x3ffffff;
            d2 += c; c = d2 >> 26; _h2 = (uint)d2 & 0x3ffffff;
            d3 += c; c = d3 >> 26; _h3 = (uint)d3 & 0x3ffffff;
            d4 += c; c = d4 >> 26; _h4 = (uint)d4 & 0x3ffffff;
            _h0 += (uint)c * 5; c = _h0 >> 26; _h0 &= 0x3ffffff;
            _h1 += (uint)c;
        }

        /// <summary>The 16-byte tag into <paramref name="tag"/>.</summary>
        public void Finish(byte[] tag)
        {
            uint h0 = _h0, h1 = _h1, h2 = _h2, h3 = _h3, h4 = _h4;
            uint c = h1 >> 26; h1 &= 0x3ffffff;
            h2 += c; c = h2 >> 26; h2 &= 0x3ffffff;
            h3 += c; c = h3 >> 26; h3 &= 0x3ffffff;
            h4 += c; c = h4 >> 26; h4 &= 0x3ffffff;
            h0 += c * 5; c = h0 >> 26; h0 &= 0x3ffffff;
            h1 += c;

            // h - p = h + 5 - 2^130: keep it if it did not go negative.
            uint g0 = h0 + 5; c = g0 >> 26; g0 &= 0x3ffffff;
            uint g1 = h1 + c; c = g1 >> 26; g1 &= 0x3ffffff;
            uint g2 = h2 + c; c = g2 >> 26; g2 &= 0x3ffffff;
            uint g3 = h3 + c; c = g3 >> 26; g3 &= 0x3ffffff;
            uint g4 = h4 + c - (1u << 26);
            uint mask = (g4 >> 31) - 1;
            g0 &= mask; g1 &= mask; g2 &= mask; g3 &= mask; g4 &= mask;
            mask = ~mask;
            h0 = (h0 & mask) | g0; h1 = (h1 & mask) | g1; h2 = (h2 & mask) | g2;
            h3 = (h3 & mask) | g3; h4 = (h4 & mask) | g4;

            h0 = h0 | (h1 << 26);
            h1 = (h1 >> 6) | (h2 << 20);
            h2 = (h2 >> 12) | (h3 << 14);
            h3 = (h3 >> 18) | (h4 << 8);

            ulong f = (ulong)h0 + _pad0; h0 = (uint)f;
            f = (ulong)h1 + _pad1 + (f >> 32); h1 = (uint)f;
            f = (ulong)h2 + _pad2 + (f >> 32); h2 = (uint)f;
            f = (ulong)h3 + _pad3 + (f >> 32); h3 = (uint)f;
            Put(tag, 0, h0); Put(tag, 4, h1); Put(tag, 8, h2); Put(tag, 12, h3);
        }

        static void Put(byte[] b, int i, uint v)
        {
            b[i] = (byte)v; b[i + 1] = (byte)(v >> 8); b[i + 2] = (byte)(v >> 16); b[i + 3] = (byte)(v >> 24);
        }

        /// <summary>The MAC of a message of any length (RFC 8439 2.5; allocates; for tests).</summary>
        public static byte[] Mac(byte[] key, byte[] message)
        {
            var poly = new Poly1305();
            poly.Init(key);
            int full = message.Length & ~15;
            for (int i = 0; i < full; i += 16) poly.BlockAt(message, i, 1u << 24);
            int rest = message.Length - full;
            if (rest > 0)
            {
                // A short final block gets its 1 bit after the message bytes, not at bit 128.
                var last = new byte[16];
                Buffer.BlockCopy(message, full, last, 0, rest);
                last[rest] = 1;
                poly.BlockAt(last, 0, 0);
            }
            var tag = new byte[16];
            poly.Finish(tag);
            return tag;
        }
    }
}
