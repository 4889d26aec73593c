// The reliability layer inside a connection (PROTOCOL.md, "Reliability and channels"): packet
// acks, RTT and resend timeout, reliable channels with fragmentation, unreliable and sequenced
// channels. A port of crates/proto/src/reliable, sans-IO: time comes in as microseconds.
using System;

namespace Tickwire.Protocol
{
    /// <summary>Why a reliability payload was refused.</summary>
    public enum ReadResult
    {
        /// <summary>Read (possibly a duplicate or stale packet, which is not an error).</summary>
        Ok,
        /// <summary>Malformed: dropped whole, nothing delivered, not acked.</summary>
        Malformed,
        /// <summary>A bound the peer must respect was broken: close the connection.</summary>
        Fatal,
    }

    /// <summary>Why a message was not queued.</summary>
    public enum SendResult
    {
        /// <summary>Queued.</summary>
        Ok,
        /// <summary>No such channel.</summary>
        UnknownChannel,
        /// <summary>Larger than the channel allows (max_message_size, or one packet for unreliable ones).</summary>
        TooLarge,
        /// <summary>The reliable queue is full: the peer is not keeping up.</summary>
        QueueFull,
        /// <summary>Not connected.</summary>
        NotConnected,
    }

    /// <summary>Counters and estimates of one connection.</summary>
    public struct ReliabilityStats
    {
        /// <summary>Smoothed round-trip time, microseconds.</summary>
        public long RttMicros;
        /// <summary>Resend timeout, microseconds.</summary>
        public long ResendTimeoutMicros;
        /// <summary>Fraction of the last 256 ack-eliciting packets lost.</summary>
        public float PacketLoss;
        /// <summary>Packets written.</summary>
        public ulong PacketsSent;
        /// <summary>New packets read.</summary>
        public ulong PacketsReceived;
        /// <summary>Duplicate packets read (frames ignored).</summary>
        public ulong PacketsDuplicate;
        /// <summary>Reliable units sent again.</summary>
        public ulong UnitsResent;
        /// <summary>Unreliable messages dropped from a full send queue.</summary>
        public ulong MessagesDropped;
    }

    /// <summary>
    /// One end's reliability state. Drive it with <see cref="WritePacket"/> (until it returns 0)
    /// and <see cref="ReadPacket"/>; received messages go to the <see cref="Inbox"/> given.
    /// </summary>
    public sealed class Reliability
    {
        /// <summary>Bytes of the payload header.</summary>
        public const int HeaderLength = 9;
        /// <summary>Reliable messages in flight per channel.</summary>
        public const int MessageWindow = 1024;
        /// <summary>Peer sequences a receiver remembers.</summary>
        public const int ReceivedWindow = 256;
        /// <summary>Smallest fragment size a receiver accepts.</summary>
        public const int MinFragmentSize = 64;
        /// <summary>Most fragments per message.</summary>
        public const int MaxFragments = 65536;
        /// <summary>How long an ack for unreliable frames may wait, microseconds.</summary>
        public const long MaxAckDelay = 100000;
        /// <summary>How often a stream without reliable frames asks for an immediate ack, microseconds.</summary>
        public const long RttProbeInterval = 1000000;
        internal const long InitialRtt = 100000;
        internal const long MinResendTimeout = 10000;
        internal const long MaxResendTimeout = 1000000;
        internal const long ResendMargin = 10000;
        const int MaxSentRecords = 1024;
        const int FragmentHeaderLength = 11;
        const int MinFrameLength = 2;

        readonly ChannelKind[] _kinds;
        readonly Channel[] _channels;
        readonly int _maxPacketPayload, _maxMessageSize, _maxReassemblyBytes, _maxReliableQueueBytes, _maxUnreliableQueue;
        readonly int _fragmentSize, _maxWholeReliable, _maxUnreliable, _maxSequenced;
        readonly Inbox _inbox;
        readonly BytePool _pool = new BytePool();

        // Sent packets (acks.rs SentPackets).
        struct SentRecord { public long SentAt; public long EntriesEnd; public bool Acked, Eliciting, Probe; }
        struct SentEntry { public byte Channel; public ushort Unit; public long Message; }
        readonly Ring<SentRecord> _records = new Ring<SentRecord>(64);
        readonly Ring<SentEntry> _entries = new Ring<SentEntry>(64);
        ushort _frontSequence;
        long _entriesBase;

        // Received packets (acks.rs ReceivedPackets).
        bool _hasLatest;
        ushort _latest;
        Bits256 _received, _unreported;
        bool _urgent;
        bool _hasSoonSince;
        long _soonSince;

        // RTT and loss.
        long _srtt = InitialRtt, _rttvar = InitialRtt / 2, _rto;
        bool _sampled;
        Bits256 _lossOutcomes;
        int _lossHead, _lossLength, _lossCount;
        bool _hasLargestAcked;
        ushort _largestAcked;
        bool _hasLastProbe;
        long _lastProbeSent;

        int _reliableQueueBytes, _spanBytes, _bytesInFlight, _heldBytes;
        ReliabilityStats _stats = new ReliabilityStats();

        // One packet being written.
        byte[] _out;
        int _outStart, _outLength, _outLimit, _outFrames;

        /// <summary>
        /// A reliability layer for <paramref name="channels"/>; sizes as in PROTOCOL.md's
        /// "Connection parameters" (max_packet_payload = MTU - 25).
        /// </summary>
        public Reliability(ChannelKind[] channels, int maxPacketPayload, int maxMessageSize, Inbox inbox,
            int maxReassemblyBytes = 1 << 20, int maxReliableQueueBytes = 4 << 20, int maxUnreliableQueue = 256)
        {
            if (channels.Length < 1 || channels.Length > 32) throw new ArgumentException("1 to 32 channels");
            if (maxPacketPayload < 128 || maxPacketPayload > 65536) throw new ArgumentException("max_packet_payload outside 128..=65536");
            _kinds = (ChannelKind[])channels.Clone();
            _channels = new Channel[channels.Length];
            for (int i = 0; i < channels.Length; i++) _channels[i] = new Channel(channels[i]);
            _maxPacketPayload = maxPacketPayload;
            _maxMessageSize = maxMessageSize;
            _maxReassemblyBytes = Math.Max(maxReassemblyBytes, maxMessageSize);
            _maxReliableQueueBytes = Math.Max(maxReliableQueueBytes, maxMessageSize);
            _maxUnreliableQueue = Math.Max(1, maxUnreliableQueue);
            int frameSpace = maxPacketPayload - HeaderLength;
            _fragmentSize = Math.Min(frameSpace - FragmentHeaderLength, 65535);
            if ((long)maxMessageSize > (long)_fragmentSize * MaxFragments) throw new ArgumentException("max_message_size needs too many fragments");
            _maxWholeReliable = LargestBody(frameSpace, 3);
            _maxUnreliable = LargestBody(frameSpace, 1);
            _maxSequenced = LargestBody(frameSpace, 3);
            _inbox = inbox;
            _rto = ResendTimeout(_srtt, _rttvar);
        }

        static int LargestBody(int space, int fixedBytes)
        {
            int n = Math.Max(0, space - (fixedBytes + 1));
            while (n > 0 && fixedBytes + VarintLength(n) + n > space) n--;
            return n;
        }

        internal static int VarintLength(int value)
        {
            uint v = (uint)value;
            return v < 1u << 7 ? 1 : v < 1u << 14 ? 2 : v < 1u << 21 ? 3 : v < 1u << 28 ? 4 : 5;
        }

        static long ResendTimeout(long srtt, long rttvar)
        {
            long rto = srtt + Math.Max(rttvar * 4, ResendMargin);
            return Math.Min(Math.Max(rto, MinResendTimeout), MaxResendTimeout);
        }

        /// <summary>a is newer than b: (a - b) mod 65536 in 1..=32767.</summary>
        public static bool SequenceNewer(ushort a, ushort b)
        {
            int d = (a - b) & 0xffff;
            return d != 0 && d < 0x8000;
        }

        /// <summary>Counters and estimates.</summary>
        public ReliabilityStats Stats
        {
            get
            {
                var s = _stats;
                s.RttMicros = _srtt;
                s.ResendTimeoutMicros = _rto;
                s.PacketLoss = _lossLength == 0 ? 0f : (float)_lossCount / _lossLength;
                return s;
            }
        }

        /// <summary>The largest message <paramref name="channel"/> takes, or -1 for no such channel.</summary>
        public int MaxMessageLength(int channel)
        {
            if ((uint)channel >= (uint)_channels.Length) return -1;
            switch (_kinds[channel])
            {
                case ChannelKind.Reliable: return _maxMessageSize;
                case ChannelKind.Unreliable: return _maxUnreliable;
                default: return _maxSequenced;
            }
        }

        /// <summary>Queues a message (copied into a pooled buffer).</summary>
        public SendResult Send(int channel, byte[] bytes, int offset, int length)
        {
            int max = MaxMessageLength(channel);
            if (max < 0) return SendResult.UnknownChannel;
            if (length > max) return SendResult.TooLarge;
            var state = _channels[channel];
            if (state.Kind == ChannelKind.Reliable)
            {
                if (_reliableQueueBytes + length > _maxReliableQueueBytes) return SendResult.QueueFull;
                _reliableQueueBytes += length;
            }
            var copy = _pool.Rent(length);
            Buffer.BlockCopy(bytes, offset, copy, 0, length);
            var message = new Queued { Data = copy, Length = length };
            if (state.Kind == ChannelKind.Reliable)
            {
                state.Pending.PushBack(message);
                return SendResult.Ok;
            }
            if (state.Queue.Count >= _maxUnreliableQueue)
            {
                _pool.Return(state.Queue.PopFront().Data);
                _stats.MessagesDropped++;
            }
            if (state.Kind == ChannelKind.UnreliableSequenced)
            {
                message.Number = state.NextSequence;
                state.NextSequence++;
            }
            state.Queue.PushBack(message);
            return SendResult.Ok;
        }

        /// <summary>True when a packet should go out now (an ack owed at once, or sendable data).</summary>
        public bool WantsToSend
        {
            get
            {
                if (_urgent) return true;
                foreach (var c in _channels)
                {
                    if (c.Kind == ChannelKind.Reliable)
                    {
                        if (c.Stalled || (c.Pending.Count > 0 && c.Window.Count < MessageWindow && _spanBytes + c.Pending.Front.Length <= _maxReassemblyBytes))
                            return true;
                    }
                    else if (c.Queue.Count > 0) return true;
                }
                return false;
            }
        }

        /// <summary>The earliest time a resend or a delayed ack is due, or -1.</summary>
        public long NextTimeout()
        {
            long next = -1;
            foreach (var c in _channels)
            {
                if (c.Kind != ChannelKind.Reliable) continue;
                for (int m = 0; m < c.Window.Count; m++)
                {
                    var message = c.Window[m];
                    if (message.Unacked == 0) continue;
                    for (int u = 0; u < message.UnitCount; u++)
                    {
                        var unit = message.Units[u];
                        if (!unit.Acked && unit.SentAt >= 0 && (next < 0 || unit.SentAt + _rto < next)) next = unit.SentAt + _rto;
                    }
                }
            }
            if (_hasSoonSince && (next < 0 || _soonSince + MaxAckDelay < next)) next = _soonSince + MaxAckDelay;
            return next;
        }

        // ---- writing ----

        /// <summary>
        /// Writes the next payload into out[offset..offset+capacity]; returns its length, or 0 when
        /// there is nothing to send. <paramref name="force"/> writes a keepalive (acks only).
        /// </summary>
        public int WritePacket(long now, byte[] output, int offset, int capacity, bool force)
        {
            int limit = Math.Min(capacity, _maxPacketPayload);
            if (limit < HeaderLength) return 0;
            Retire(now);
            foreach (var c in _channels) if (c.Kind == ChannelKind.Reliable) Admit(c);
            _out = output;
            _outStart = offset + HeaderLength;
            _outLength = 0;
            _outLimit = limit - HeaderLength;
            _outFrames = 0;
            long entriesBefore = _entriesBase + _entries.Count;
            for (int id = 0; id < _channels.Length; id++)
                if (_channels[id].Kind == ChannelKind.Reliable) WriteDue((byte)id, _channels[id], now);
            for (int id = 0; id < _channels.Length; id++)
            {
                var c = _channels[id];
                if (c.Kind == ChannelKind.Reliable) continue;
                while (c.Queue.Count > 0)
                {
                    ref Queued q = ref c.Queue.Front;
                    bool sequenced = c.Kind == ChannelKind.UnreliableSequenced;
                    if (!TryMessage((byte)id, sequenced, q.Number, q.Data, 0, q.Length)) break;
                    _pool.Return(c.Queue.PopFront().Data);
                }
            }
            _out = null;
            int frames = _outFrames;
            bool ackDue = _urgent || (_hasSoonSince && _soonSince + MaxAckDelay <= now);
            if (frames == 0 && !force && !ackDue) return 0;
            bool carriesReliable = _entriesBase + _entries.Count > entriesBefore;
            bool probeDue = !_hasLastProbe || now - _lastProbeSent >= RttProbeInterval;
            // An RTT probe rides on unreliable frames; a keepalive (forced, no frames) asks
            // for no ack: each side sends its own when quiet (PROTOCOL.md, keepalive).
            bool ping = !carriesReliable && frames > 0 && probeDue;
            int wanted = Wanted(carriesReliable, ping, frames > 0);
            if (wanted == WantNow)
            {
                _hasLastProbe = true;
                _lastProbeSent = now;
            }
            ushort sequence = (ushort)(_frontSequence + _records.Count);
            byte flags = ping ? (byte)0x02 : (byte)0;
            ushort ack = 0;
            uint bits = 0;
            if (_hasLatest)
            {
                flags |= 0x01;
                TakeAck(out ack, out bits);
            }
            output[offset] = flags;
            output[offset + 1] = (byte)sequence; output[offset + 2] = (byte)(sequence >> 8);
            output[offset + 3] = (byte)ack; output[offset + 4] = (byte)(ack >> 8);
            output[offset + 5] = (byte)bits; output[offset + 6] = (byte)(bits >> 8);
            output[offset + 7] = (byte)(bits >> 16); output[offset + 8] = (byte)(bits >> 24);
            _records.PushBack(new SentRecord
            {
                SentAt = now,
                EntriesEnd = _entriesBase + _entries.Count,
                Eliciting = wanted != WantNever,
                Probe = wanted == WantNow,
            });
            if (_records.Count > MaxSentRecords) PopRecord();
            _stats.PacketsSent++;
            return HeaderLength + _outLength;
        }

        const int WantNever = 0, WantSoon = 1, WantNow = 2;

        static int Wanted(bool reliable, bool ping, bool frames)
        {
            return reliable || ping ? WantNow : frames ? WantSoon : WantNever;
        }

        bool TryMessage(byte channel, bool numbered, ushort number, byte[] data, int offset, int length)
        {
            int need = 1 + (numbered ? 2 : 0) + VarintLength(length) + length;
            if (need > _outLimit - _outLength) return false;
            int at = _outStart + _outLength;
            _out[at++] = (byte)(channel & 0x1f);
            if (numbered)
            {
                _out[at++] = (byte)number;
                _out[at++] = (byte)(number >> 8);
            }
            uint v = (uint)length;
            while (v >= 0x80)
            {
                _out[at++] = (byte)(v | 0x80);
                v >>= 7;
            }
            _out[at++] = (byte)v;
            Buffer.BlockCopy(data, offset, _out, at, length);
            _outLength += need;
            _outFrames++;
            return true;
        }

        bool TryFragment(byte channel, ushort id, int totalLength, int fragmentSize, ushort index, byte[] data, int offset, int length)
        {
            int need = FragmentHeaderLength + length;
            if (need > _outLimit - _outLength) return false;
            int at = _outStart + _outLength;
            _out[at] = (byte)((channel & 0x1f) | 0x80);
            _out[at + 1] = (byte)id; _out[at + 2] = (byte)(id >> 8);
            _out[at + 3] = (byte)totalLength; _out[at + 4] = (byte)(totalLength >> 8);
            _out[at + 5] = (byte)(totalLength >> 16); _out[at + 6] = (byte)(totalLength >> 24);
            _out[at + 7] = (byte)fragmentSize; _out[at + 8] = (byte)(fragmentSize >> 8);
            _out[at + 9] = (byte)index; _out[at + 10] = (byte)(index >> 8);
            Buffer.BlockCopy(data, offset, _out, at + FragmentHeaderLength, length);
            _outLength += need;
            _outFrames++;
            return true;
        }

        void Admit(Channel c)
        {
            while (c.Pending.Count > 0)
            {
                int length = c.Pending.Front.Length;
                if (c.Window.Count >= MessageWindow || _spanBytes + length > _maxReassemblyBytes) break;
                var queued = c.Pending.PopFront();
                _spanBytes += length;
                var message = c.Spare.Count > 0 ? c.Spare.Pop() : new SendMessage();
                message.Data = queued.Data;
                message.Length = length;
                if (length <= _maxWholeReliable)
                {
                    message.FragmentSize = 0;
                    message.UnitCount = 1;
                }
                else
                {
                    message.FragmentSize = _fragmentSize;
                    message.UnitCount = (length + _fragmentSize - 1) / _fragmentSize;
                }
                if (message.Units == null || message.Units.Length < message.UnitCount) message.Units = new UnitState[Math.Max(1, message.UnitCount)];
                for (int u = 0; u < message.UnitCount; u++) message.Units[u] = new UnitState { SentAt = -1 };
                message.Unacked = message.UnitCount;
                c.Window.PushBack(message);
            }
        }

        void WriteDue(byte channel, Channel c, long now)
        {
            int m = 0, u = 0;
            if (c.CursorValid && c.CursorNow == now)
            {
                m = c.CursorMessage;
                u = c.CursorUnit;
            }
            int resumeM = -1, resumeU = 0;
            for (; m < c.Window.Count; m++, u = 0)
            {
                var message = c.Window[m];
                if (message.Unacked == 0) continue;
                long number = c.Oldest + m;
                ushort id = (ushort)number;
                bool stop = false;
                for (; u < message.UnitCount; u++)
                {
                    ref UnitState unit = ref message.Units[u];
                    bool due = !unit.Acked && (unit.SentAt < 0 || now >= unit.SentAt + _rto);
                    if (!due) continue;
                    if (_outLimit - _outLength < MinFrameLength)
                    {
                        if (resumeM < 0) { resumeM = m; resumeU = u; }
                        stop = true;
                        break;
                    }
                    bool written;
                    int length;
                    if (message.FragmentSize == 0)
                    {
                        length = message.Length;
                        written = TryMessage(channel, true, id, message.Data, 0, length);
                    }
                    else
                    {
                        int start = u * message.FragmentSize;
                        length = Math.Min(message.FragmentSize, message.Length - start);
                        written = TryFragment(channel, id, message.Length, message.FragmentSize, (ushort)u, message.Data, start, length);
                    }
                    if (written)
                    {
                        if (unit.SentAt < 0) _bytesInFlight += length;
                        else _stats.UnitsResent++;
                        unit.SentAt = now;
                        _entries.PushBack(new SentEntry { Channel = channel, Unit = (ushort)u, Message = number });
                    }
                    else if (resumeM < 0)
                    {
                        resumeM = m;
                        resumeU = u;
                    }
                }
                if (stop) break;
            }
            c.Stalled = resumeM >= 0;
            c.CursorValid = true;
            c.CursorNow = now;
            c.CursorMessage = resumeM >= 0 ? resumeM : c.Window.Count;
            c.CursorUnit = resumeM >= 0 ? resumeU : 0;
        }

        void TakeAck(out ushort ack, out uint bits)
        {
            int from = _unreported.LowestSet();
            if (from < 0) from = 0;
            bits = _received.U32At(from + 1);
            _unreported.ClearRange(from, from + 33);
            if (_unreported.IsEmpty)
            {
                _urgent = false;
                _hasSoonSince = false;
            }
            ack = (ushort)(_latest - from);
        }

        // ---- sent packet records ----

        void Retire(long now)
        {
            long lossDelay = _rto * 2 + MaxAckDelay;
            while (_records.Count > 0)
            {
                ref SentRecord front = ref _records.Front;
                if (!front.Acked && now - front.SentAt < lossDelay) break;
                PopRecord();
            }
        }

        void PopRecord()
        {
            var record = _records.PopFront();
            if (record.Eliciting) RecordLoss(!record.Acked);
            _frontSequence++;
            long count = Math.Min(Math.Max(0, record.EntriesEnd - _entriesBase), _entries.Count);
            for (long i = 0; i < count; i++) _entries.PopFront();
            _entriesBase += count;
        }

        void RecordLoss(bool lost)
        {
            if (_lossLength == 256)
            {
                if (_lossOutcomes.Get(_lossHead)) _lossCount--;
            }
            else _lossLength++;
            _lossOutcomes.Set(_lossHead, lost);
            if (lost) _lossCount++;
            _lossHead = (_lossHead + 1) % 256;
        }

        void HandleAck(long now, ushort ack, uint bits)
        {
            for (int back = 0; back <= 32; back++)
            {
                if (back > 0 && ((bits >> (back - 1)) & 1) == 0) continue;
                ushort sequence = (ushort)(ack - back);
                int index = (ushort)(sequence - _frontSequence);
                if (index >= _records.Count) continue;
                long start = index == 0 ? _entriesBase : _records[index - 1].EntriesEnd;
                ref SentRecord record = ref _records[index];
                if (record.Acked) continue;
                record.Acked = true;
                if (back == 0 && (!_hasLargestAcked || SequenceNewer(sequence, _largestAcked)))
                {
                    _hasLargestAcked = true;
                    _largestAcked = sequence;
                    if (record.Probe) SampleRtt(now - record.SentAt);
                }
                for (long e = start; e < record.EntriesEnd; e++)
                {
                    long offset = e - _entriesBase;
                    if (offset < 0 || offset >= _entries.Count) continue;
                    var entry = _entries[(int)offset];
                    var c = _channels[entry.Channel];
                    long mi = entry.Message - c.Oldest;
                    if (mi < 0 || mi >= c.Window.Count) continue;
                    var message = c.Window[(int)mi];
                    if (entry.Unit >= message.UnitCount) continue;
                    ref UnitState unit = ref message.Units[entry.Unit];
                    if (unit.Acked) continue;
                    unit.Acked = true;
                    message.Unacked--;
                    _bytesInFlight -= message.FragmentSize == 0 ? message.Length
                        : Math.Min(message.FragmentSize, message.Length - entry.Unit * message.FragmentSize);
                }
            }
            foreach (var c in _channels)
            {
                if (c.Kind != ChannelKind.Reliable) continue;
                while (c.Window.Count > 0 && c.Window.Front.Unacked == 0)
                {
                    var done = c.Window.PopFront();
                    _reliableQueueBytes -= done.Length;
                    _spanBytes -= done.Length;
                    _pool.Return(done.Data);
                    done.Data = null;
                    c.Spare.Push(done);
                    c.Oldest++;
                }
                c.CursorValid = false;
            }
        }

        void SampleRtt(long rtt)
        {
            if (rtt < 0) rtt = 0;
            if (_sampled)
            {
                long deviation = Math.Abs(_srtt - rtt);
                _rttvar = (_rttvar * 3 + deviation) / 4;
                _srtt = (_srtt * 7 + rtt) / 8;
            }
            else
            {
                _srtt = rtt;
                _rttvar = rtt / 2;
                _sampled = true;
            }
            _rto = ResendTimeout(_srtt, _rttvar);
        }

        // ---- reading ----

        struct Frame
        {
            public int Kind; // 0 reliable, 1 fragment, 2 unreliable, 3 sequenced
            public byte Channel;
            public ushort Id;
            public int TotalLength, FragmentSize;
            public ushort Index;
            public int DataOffset, DataLength;
        }

        /// <summary>Reads one frame at <paramref name="at"/>; false when malformed.</summary>
        bool ReadFrame(byte[] p, int end, ref int at, out Frame frame)
        {
            frame = default(Frame);
            if (at >= end) return false;
            byte tag = p[at++];
            if ((tag & 0x60) != 0) return false;
            frame.Channel = (byte)(tag & 0x1f);
            if (frame.Channel >= _kinds.Length) return false;
            var kind = _kinds[frame.Channel];
            if ((tag & 0x80) != 0)
            {
                if (kind != ChannelKind.Reliable) return false;
                if (end - at < 10) return false;
                frame.Kind = 1;
                frame.Id = (ushort)(p[at] | p[at + 1] << 8);
                uint total = LittleEndian.U32(p, at + 2);
                frame.FragmentSize = p[at + 6] | p[at + 7] << 8;
                frame.Index = (ushort)(p[at + 8] | p[at + 9] << 8);
                at += 10;
                if (frame.FragmentSize < MinFragmentSize) return false;
                ulong count = ((ulong)total + (ulong)frame.FragmentSize - 1) / (ulong)frame.FragmentSize;
                if (count > MaxFragments) return false;
                if (frame.Index >= count) return false;
                if (total > int.MaxValue) return false;
                frame.TotalLength = (int)total;
                int start = frame.Index * frame.FragmentSize;
                int length = Math.Min(frame.FragmentSize, frame.TotalLength - start);
                if (end - at < length) return false;
                frame.DataOffset = at;
                frame.DataLength = length;
                at += length;
                return true;
            }
            if (kind == ChannelKind.Reliable || kind == ChannelKind.UnreliableSequenced)
            {
                if (end - at < 2) return false;
                frame.Id = (ushort)(p[at] | p[at + 1] << 8);
                at += 2;
            }
            frame.Kind = kind == ChannelKind.Reliable ? 0 : kind == ChannelKind.Unreliable ? 2 : 3;
            uint len;
            if (!ReadVarint(p, end, ref at, out len)) return false;
            if (len > (uint)(end - at)) return false;
            frame.DataOffset = at;
            frame.DataLength = (int)len;
            at += (int)len;
            return true;
        }

        static bool ReadVarint(byte[] p, int end, ref int at, out uint value)
        {
            value = 0;
            for (int group = 0; group < 5; group++)
            {
                if (at >= end) return false;
                byte b = p[at++];
                uint payload = (uint)(b & 0x7f);
                if (group == 4 && b > 0x0f) return false;
                value |= payload << (7 * group);
                if ((b & 0x80) == 0) return !(group > 0 && payload == 0);
            }
            return false;
        }

        /// <summary>Reads a payload (PROTOCOL.md, "Reading a payload"); delivers into the inbox.</summary>
        public ReadResult ReadPacket(long now, byte[] payload, int offset, int length)
        {
            if (length < HeaderLength) return ReadResult.Malformed;
            int end = offset + length;
            byte flags = payload[offset];
            if ((flags & ~0x03) != 0) return ReadResult.Malformed;
            ushort sequence = (ushort)(payload[offset + 1] | payload[offset + 2] << 8);
            ushort ack = (ushort)(payload[offset + 3] | payload[offset + 4] << 8);
            uint bits = LittleEndian.U32(payload, offset + 5);
            bool hasAck = (flags & 0x01) != 0;
            if (!hasAck && (ack != 0 || bits != 0)) return ReadResult.Malformed;
            bool ping = (flags & 0x02) != 0;

            // Check every frame first, changing nothing.
            int frames = 0, reliable = 0;
            int at = offset + HeaderLength;
            while (at < end)
            {
                Frame frame;
                if (!ReadFrame(payload, end, ref at, out frame)) return ReadResult.Malformed;
                frames++;
                if (frame.Kind == 0 || frame.Kind == 1)
                {
                    reliable++;
                    int size = frame.Kind == 0 ? frame.DataLength : frame.TotalLength;
                    if (size > _maxMessageSize) return ReadResult.Fatal;
                    var receiver = _channels[frame.Channel];
                    int ahead = (ushort)(frame.Id - receiver.NextId);
                    if (ahead < 0x8000)
                    {
                        if (ahead >= MessageWindow) return ReadResult.Malformed;
                        if (frame.Kind == 1 && ahead < receiver.Slots.Count)
                        {
                            ref Slot slot = ref receiver.Slots[ahead];
                            if (slot.State == SlotPartial && (slot.Length != frame.TotalLength || slot.FragmentSize != frame.FragmentSize))
                                return ReadResult.Malformed;
                        }
                    }
                }
            }

            int wanted = Wanted(reliable > 0, ping, frames > 0);
            int arrival = Insert(sequence, wanted, now);
            if (arrival == ArrivalStale) return ReadResult.Ok;
            if (hasAck) HandleAck(now, ack, bits);
            Retire(now);
            if (arrival == ArrivalDuplicate)
            {
                _stats.PacketsDuplicate++;
                return ReadResult.Ok;
            }
            _stats.PacketsReceived++;

            at = offset + HeaderLength;
            while (at < end)
            {
                Frame frame;
                ReadFrame(payload, end, ref at, out frame);
                switch (frame.Kind)
                {
                    case 0:
                        if (!OnMessage(_channels[frame.Channel], frame.Channel, frame.Id, payload, frame.DataOffset, frame.DataLength)) return ReadResult.Fatal;
                        break;
                    case 1:
                        if (!OnFragment(_channels[frame.Channel], frame, payload)) return ReadResult.Fatal;
                        break;
                    case 2:
                        _inbox.Add(frame.Channel, payload, frame.DataOffset, frame.DataLength);
                        break;
                    default:
                        var c = _channels[frame.Channel];
                        if (!c.HasLastDelivered || SequenceNewer(frame.Id, c.LastDelivered))
                        {
                            c.HasLastDelivered = true;
                            c.LastDelivered = frame.Id;
                            _inbox.Add(frame.Channel, payload, frame.DataOffset, frame.DataLength);
                        }
                        break;
                }
            }
            return ReadResult.Ok;
        }

        const int ArrivalNew = 0, ArrivalDuplicate = 1, ArrivalStale = 2;

        int Insert(ushort sequence, int wanted, long now)
        {
            int back;
            if (_hasLatest && !SequenceNewer(sequence, _latest))
            {
                back = (ushort)(_latest - sequence);
            }
            else
            {
                if (_hasLatest)
                {
                    int ahead = (ushort)(sequence - _latest);
                    _received.ShiftUp(ahead);
                    _unreported.ShiftUp(ahead);
                }
                _hasLatest = true;
                _latest = sequence;
                back = 0;
            }
            if (back >= ReceivedWindow) return ArrivalStale;
            if (_received.Get(back)) return ArrivalDuplicate;
            _received.Set(back, true);
            if (wanted == WantSoon)
            {
                _unreported.Set(back, true);
                if (!_hasSoonSince)
                {
                    _hasSoonSince = true;
                    _soonSince = now;
                }
            }
            else if (wanted == WantNow)
            {
                _unreported.Set(back, true);
                _urgent = true;
            }
            return ArrivalNew;
        }

        const byte SlotEmpty = 0, SlotComplete = 1, SlotPartial = 2;

        ref Slot SlotAt(Channel c, int offset)
        {
            while (c.Slots.Count <= offset) c.Slots.PushBack(default(Slot));
            return ref c.Slots[offset];
        }

        bool Reserve(int length)
        {
            if ((long)_heldBytes + length > _maxReassemblyBytes) return false;
            _heldBytes += length;
            return true;
        }

        bool OnMessage(Channel c, byte channel, ushort id, byte[] data, int offset, int length)
        {
            int ahead = (ushort)(id - c.NextId);
            if (ahead >= 0x8000) return true;
            if (ahead < c.Slots.Count && c.Slots[ahead].State != SlotEmpty) return true;
            if (ahead == 0)
            {
                if (c.Slots.Count > 0) c.Slots.PopFront();
                c.NextId++;
                _inbox.Add(channel, data, offset, length);
            }
            else
            {
                if (!Reserve(length)) return false;
                ref Slot slot = ref SlotAt(c, ahead);
                slot.State = SlotComplete;
                slot.Data = _pool.Rent(length);
                slot.Length = length;
                Buffer.BlockCopy(data, offset, slot.Data, 0, length);
            }
            DeliverReady(c, channel);
            return true;
        }

        bool OnFragment(Channel c, Frame frame, byte[] payload)
        {
            int ahead = (ushort)(frame.Id - c.NextId);
            if (ahead >= 0x8000) return true;
            ref Slot slot = ref SlotAt(c, ahead);
            if (slot.State == SlotComplete) return true;
            if (slot.State == SlotEmpty)
            {
                if (!Reserve(frame.TotalLength)) return false;
                int count = (frame.TotalLength + frame.FragmentSize - 1) / frame.FragmentSize;
                slot.State = SlotPartial;
                slot.Data = _pool.Rent(frame.TotalLength);
                slot.Length = frame.TotalLength;
                slot.FragmentSize = frame.FragmentSize;
                slot.Received = new ulong[(count + 63) / 64];
                slot.Missing = count;
            }
            else if (slot.Length != frame.TotalLength || slot.FragmentSize != frame.FragmentSize)
            {
                return true; // checked before; cannot happen
            }
            int word = frame.Index / 64;
            ulong bit = 1UL << (frame.Index % 64);
            if ((slot.Received[word] & bit) == 0 && frame.DataLength > 0)
            {
                Buffer.BlockCopy(payload, frame.DataOffset, slot.Data, frame.Index * frame.FragmentSize, frame.DataLength);
                slot.Received[word] |= bit;
                slot.Missing--;
            }
            if (slot.Missing == 0)
            {
                slot.State = SlotComplete;
                slot.Received = null;
                DeliverReady(c, frame.Channel);
            }
            return true;
        }

        void DeliverReady(Channel c, byte channel)
        {
            while (c.Slots.Count > 0 && c.Slots.Front.State == SlotComplete)
            {
                var slot = c.Slots.PopFront();
                _heldBytes -= slot.Length;
                _inbox.Add(channel, slot.Data, 0, slot.Length);
                _pool.Return(slot.Data);
                c.NextId++;
            }
        }

        // ---- state ----

        struct Queued { public byte[] Data; public int Length; public ushort Number; }

        struct UnitState { public long SentAt; public bool Acked; }

        sealed class SendMessage
        {
            public byte[] Data;
            public int Length, FragmentSize, UnitCount, Unacked;
            public UnitState[] Units;
        }

        struct Slot
        {
            public byte State;
            public byte[] Data;
            public int Length, FragmentSize, Missing;
            public ulong[] Received;
        }

        sealed class Channel
        {
            public readonly ChannelKind Kind;
            // Reliable: sending.
            public readonly Ring<Queued> Pending = new Ring<Queued>();
            public readonly Ring<SendMessage> Window = new Ring<SendMessage>();
            public readonly System.Collections.Generic.Stack<SendMessage> Spare = new System.Collections.Generic.Stack<SendMessage>();
            public long Oldest;
            public bool CursorValid, Stalled;
            public long CursorNow;
            public int CursorMessage, CursorUnit;
            // Reliable: receiving.
            public ushort NextId;
            public readonly Ring<Slot> Slots = new Ring<Slot>();
            // Unreliable and sequenced.
            public readonly Ring<Queued> Queue = new Ring<Queued>();
            public ushort NextSequence;
            public bool HasLastDelivered;
            public ushort LastDelivered;

            public Channel(ChannelKind kind) { Kind = kind; }
        }
    }

    /// <summary>256 bits (acks.rs Bits256).</summary>
    internal struct Bits256
    {
        ulong _w0, _w1, _w2, _w3;

        ulong Word(int k) { return k == 0 ? _w0 : k == 1 ? _w1 : k == 2 ? _w2 : _w3; }

        void SetWord(int k, ulong v)
        {
            if (k == 0) _w0 = v; else if (k == 1) _w1 = v; else if (k == 2) _w2 = v; else _w3 = v;
        }

        public bool Get(int i) { return i >= 0 && i < 256 && ((Word(i / 64) >> (i % 64)) & 1) == 1; }

        public void Set(int i, bool value)
        {
            if (i < 0 || i >= 256) return;
            ulong mask = 1UL << (i % 64);
            ulong w = Word(i / 64);
            SetWord(i / 64, value ? w | mask : w & ~mask);
        }

        public void ShiftUp(int n)
        {
            if (n >= 256) { _w0 = _w1 = _w2 = _w3 = 0; return; }
            int words = n / 64, bits = n % 64;
            ulong o0 = _w0, o1 = _w1, o2 = _w2, o3 = _w3;
            for (int k = 3; k >= 0; k--)
            {
                int j = k - words;
                ulong low = j >= 0 ? Pick(o0, o1, o2, o3, j) << bits : 0;
                ulong carry = (j - 1 >= 0 && bits != 0) ? Pick(o0, o1, o2, o3, j - 1) >> (64 - bits) : 0;
                SetWord(k, low | carry);
            }
        }

        static ulong Pick(ulong a, ulong b, ulong c, ulong d, int k) { return k == 0 ? a : k == 1 ? b : k == 2 ? c : d; }

        public uint U32At(int start)
        {
            int word = start / 64, shift = start % 64;
            if (word >= 4) return 0;
            ulong bits = Word(word) >> shift;
            if (shift > 32 && word + 1 < 4) bits |= Word(word + 1) << (64 - shift);
            return (uint)bits;
        }

        public void ClearRange(int start, int end)
        {
            end = Math.Min(end, 256);
            for (int i = start; i < end; i++) Set(i, false);
        }

        public int LowestSet()
        {
            for (int k = 0; k < 4; k++)
            {
                ulong w = Word(k);
                if (w == 0) continue;
                int bit = 0;
                while (((w >> bit) & 1) == 0) bit++;
                return k * 64 + bit;
            }
            return -1;
        }

        public bool IsEmpty { get { return (_w0 | _w1 | _w2 | _w3) == 0; } }
    }
}
