// Small allocation-free containers the protocol keeps its state in.
using System;
using System.Collections.Generic;

namespace Tickwire.Protocol
{
    /// <summary>A growable ring (Rust's VecDeque): push back, pop front, index by position.</summary>
    internal sealed class Ring<T>
    {
        T[] _items;
        int _head;
        int _count;

        public Ring(int capacity = 16) { _items = new T[Math.Max(capacity, 4)]; }

        public int Count { get { return _count; } }

        public ref T this[int index]
        {
            get
            {
                if ((uint)index >= (uint)_count) throw new ArgumentOutOfRangeException("index");
                return ref _items[(_head + index) % _items.Length];
            }
        }

        public ref T Front { get { return ref this[0]; } }

        public void PushBack(T item)
        {
            if (_count == _items.Length)
            {
                var grown = new T[_items.Length * 2];
                for (int i = 0; i < _count; i++) grown[i] = _items[(_head + i) % _items.Length];
                _items = grown;
                _head = 0;
            }
            _items[(_head + _count) % _items.Length] = item;
            _count++;
        }

        public T PopFront()
        {
            if (_count == 0) throw new InvalidOperationException("empty ring");
            T item = _items[_head];
            _items[_head] = default(T);
            _head = (_head + 1) % _items.Length;
            _count--;
            return item;
        }

        public void Clear()
        {
            while (_count > 0) PopFront();
            _head = 0;
        }
    }

    /// <summary>
    /// Byte arrays by power-of-two size class, so message copies are recycled instead of
    /// allocated per message. Arrays come back dirty; callers track their own lengths.
    /// </summary>
    internal sealed class BytePool
    {
        readonly Stack<byte[]>[] _classes = new Stack<byte[]>[32];

        public byte[] Rent(int length)
        {
            int size = 64, index = 6;
            while (size < length) { size <<= 1; index++; }
            var stack = _classes[index];
            if (stack != null && stack.Count > 0) return stack.Pop();
            return new byte[size];
        }

        public void Return(byte[] array)
        {
            if (array == null) return;
            int index = 0;
            while ((1 << index) < array.Length) index++;
            if ((1 << index) != array.Length || index < 6) return;
            var stack = _classes[index] ?? (_classes[index] = new Stack<byte[]>());
            if (stack.Count < 256) stack.Push(array);
        }
    }

    /// <summary>What an inbox entry is.</summary>
    public enum InboxKind : byte
    {
        /// <summary>A message on a channel.</summary>
        Message,
        /// <summary>The connection is up.</summary>
        Connected,
        /// <summary>The connection ended; the code is a <see cref="DisconnectReason"/>.</summary>
        Disconnected,
    }

    /// <summary>
    /// Received messages waiting for the application: one byte arena and a list of slices into
    /// it. Emptied by <see cref="Clear"/> once the application has taken everything, so it
    /// stops growing at the largest burst between two polls.
    /// </summary>
    public sealed class Inbox
    {
        internal struct Entry { public InboxKind Kind; public byte Channel; public int Offset; public int Length; }

        byte[] _arena = new byte[4096];
        int _used;
        readonly Ring<Entry> _entries = new Ring<Entry>(64);

        /// <summary>Messages not taken yet.</summary>
        public int Count { get { return _entries.Count; } }

        /// <summary>Copies a message in.</summary>
        public void Add(byte channel, byte[] bytes, int offset, int length)
        {
            if (_used + length > _arena.Length)
            {
                var grown = new byte[Math.Max(_arena.Length * 2, _used + length)];
                Buffer.BlockCopy(_arena, 0, grown, 0, _used);
                _arena = grown;
            }
            Buffer.BlockCopy(bytes, offset, _arena, _used, length);
            _entries.PushBack(new Entry { Kind = InboxKind.Message, Channel = channel, Offset = _used, Length = length });
            _used += length;
        }

        /// <summary>Adds a connection event in order with the messages around it.</summary>
        public void AddSignal(InboxKind kind, byte code)
        {
            _entries.PushBack(new Entry { Kind = kind, Channel = code });
        }

        /// <summary>
        /// Takes the oldest entry: its kind, its channel (or reason code) and, for a message, its
        /// bytes, valid until <see cref="Clear"/> (the client clears at the start of its next poll).
        /// </summary>
        public bool TryTake(out InboxKind kind, out byte channel, out ArraySegment<byte> message)
        {
            if (_entries.Count == 0)
            {
                kind = InboxKind.Message;
                channel = 0;
                message = default(ArraySegment<byte>);
                return false;
            }
            var entry = _entries.PopFront();
            kind = entry.Kind;
            channel = entry.Channel;
            message = new ArraySegment<byte>(_arena, entry.Offset, entry.Length);
            return true;
        }

        /// <summary>Frees the arena once every message was taken (else keeps them).</summary>
        public void Clear()
        {
            if (_entries.Count == 0) _used = 0;
        }
    }

    /// <summary>Little-endian integers in byte arrays: every byte-aligned field of the protocol.</summary>
    internal static class LittleEndian
    {
        public static uint U32(byte[] b, int i)
        {
            return b[i] | (uint)b[i + 1] << 8 | (uint)b[i + 2] << 16 | (uint)b[i + 3] << 24;
        }

        public static ulong U64(byte[] b, int i) { return U32(b, i) | (ulong)U32(b, i + 4) << 32; }
    }
}
