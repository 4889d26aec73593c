// The arena's messages (docs/ARENA.md): ServerMessage and ClientMessage on channel 0,
// ClientInput on channel 1. Held to crates/arena/tests/vectors/messages.json and input.json.
using System;
using Tickwire.Wire;

namespace Tickwire.Arena
{
    /// <summary>The arena's channels.</summary>
    public static class ArenaChannels
    {
        /// <summary>Reliable: ClientMessage up, ServerMessage down.</summary>
        public const int Messages = 0;
        /// <summary>Unreliable: ClientInput up.</summary>
        public const int Inputs = 1;
        /// <summary>Unreliable-sequenced: snapshots down.</summary>
        public const int Snapshots = 2;
        /// <summary>The protocol version Welcome carries.</summary>
        public const int Protocol = 2;
    }

    /// <summary>The quantization grids of inputs and snapshots.</summary>
    public static class ArenaGrids
    {
        /// <summary>Movement axes: -1..=1 in steps of 1/64.</summary>
        public static readonly Quantize Move = new Quantize(-1, 1, 1.0 / 64);
        /// <summary>Aim: -π..=π (as f32) in steps of 2π/1023 (10 bits).</summary>
        public static readonly Quantize Aim = new Quantize(-Math.PI, Math.PI, 2 * Math.PI / 1023);
    }

    /// <summary>Input buttons.</summary>
    [Flags]
    public enum Buttons : byte
    {
        /// <summary>Nothing pressed.</summary>
        None = 0,
        /// <summary>Fire.</summary>
        Fire = 1,
        /// <summary>Warp through the nearest teleport pad.</summary>
        Warp = 2,
    }

    /// <summary>One tick's input (46 bits).</summary>
    public struct InputCommand
    {
        /// <summary>Wrapping sequence number.</summary>
        public ushort Sequence;
        /// <summary>Movement, each axis in -1..=1.</summary>
        public float MoveX, MoveY;
        /// <summary>Aim angle in -π..=π.</summary>
        public float Aim;
        /// <summary>Buttons held.</summary>
        public Buttons Buttons;

        /// <summary>Writes the command.</summary>
        public void Write(BitWriter w)
        {
            w.WriteBits(Sequence, 16);
            w.WriteQuantized(MoveX, ArenaGrids.Move);
            w.WriteQuantized(MoveY, ArenaGrids.Move);
            w.WriteQuantized(Aim, ArenaGrids.Aim);
            w.WriteBits((ulong)Buttons & 0x3, 4);
        }
    }

    /// <summary>
    /// Builds ClientInput messages: the ack of the newest decoded snapshot and the last 1 to 4
    /// commands, newest first, so a lost packet loses no input. Reuses one buffer.
    /// </summary>
    public sealed class InputSender
    {
        readonly InputCommand[] _recent = new InputCommand[4];
        readonly BitWriter _writer = new BitWriter(32);
        int _count;
        ushort _next;

        /// <summary>Records a command with the next sequence number and returns the message to send on channel 1 (valid until the next call).</summary>
        public ArraySegment<byte> Next(float moveX, float moveY, float aim, Buttons buttons, long ackTick)
        {
            var command = new InputCommand
            {
                Sequence = _next++,
                MoveX = Clamp(moveX, 1f),
                MoveY = Clamp(moveY, 1f),
                Aim = Clamp(aim, (float)Math.PI),
                Buttons = buttons,
            };
            for (int i = Math.Min(_count, 3); i > 0; i--) _recent[i] = _recent[i - 1];
            _recent[0] = command;
            _count = Math.Min(_count + 1, 4);
            return Encode(ackTick, _recent, _count, _writer);
        }

        static float Clamp(float v, float limit)
        {
            if (float.IsNaN(v)) return 0;
            return Math.Max(-limit, Math.Min(limit, v));
        }

        /// <summary>A ClientInput of <paramref name="count"/> commands (newest first); ackTick -1 for none.</summary>
        public static ArraySegment<byte> Encode(long ackTick, InputCommand[] commands, int count, BitWriter w)
        {
            if (count < 1 || count > 4) throw new ArgumentOutOfRangeException("count", "1 to 4 inputs");
            w.Reset();
            w.WriteBool(ackTick >= 0);
            if (ackTick >= 0) w.WriteBits((ulong)ackTick, 32);
            w.WriteBits((ulong)(count - 1), 2);
            for (int i = 0; i < count; i++) commands[i].Write(w);
            return new ArraySegment<byte>(w.Buffer, 0, w.ByteLength);
        }
    }

    /// <summary>ClientMessage (channel 0): chat or ping.</summary>
    public static class ClientMessages
    {
        /// <summary>A chat line (at most 160 bytes of UTF-8).</summary>
        public static byte[] Chat(string text)
        {
            var w = new BitWriter(32);
            w.WriteBits(0, 1);
            w.WriteString(text, 160);
            return w.ToArray();
        }

        /// <summary>A ping; the server answers with Pong.</summary>
        public static byte[] Ping(uint nonce)
        {
            var w = new BitWriter(8);
            w.WriteBits(1, 1);
            w.WriteBits(nonce, 32);
            return w.ToArray();
        }
    }

    /// <summary>ServerMessage variants.</summary>
    public enum ServerMessageType
    {
        /// <summary>On join and reconnect: what snapshots and prediction depend on.</summary>
        Welcome,
        /// <summary>Killer killed Victim.</summary>
        Kill,
        /// <summary>Attacker hit Victim.</summary>
        Hit,
        /// <summary>You respawned at X, Y.</summary>
        Respawn,
        /// <summary>You went through teleport Teleport to X, Y.</summary>
        Teleported,
        /// <summary>A chat line From a player.</summary>
        Chat,
        /// <summary>An announcement to everyone.</summary>
        Announcement,
        /// <summary>The answer to a ping.</summary>
        Pong,
        /// <summary>A player's name (the roster).</summary>
        Player,
        /// <summary>A player left for good.</summary>
        Left,
        /// <summary>The scoreboard.</summary>
        Scores,
    }

    /// <summary>A scoreboard line.</summary>
    public struct ScoreLine
    {
        /// <summary>Entity id.</summary>
        public ushort Id;
        /// <summary>Kills, deaths and score.</summary>
        public uint Kills, Deaths, Score;
    }

    /// <summary>A decoded ServerMessage; only the fields of its Type are meaningful.</summary>
    public sealed class ServerMessage
    {
        /// <summary>Which variant.</summary>
        public ServerMessageType Type;
        /// <summary>Welcome: protocol version (2).</summary>
        public byte Protocol;
        /// <summary>Welcome: your entity id. Player, Left: the player's id.</summary>
        public ushort Id;
        /// <summary>Welcome: map name. Chat, Announcement: the text. Player: the name.</summary>
        public string Text;
        /// <summary>Welcome: map size in metres.</summary>
        public float MapWidth, MapHeight;
        /// <summary>Welcome: tick rate.</summary>
        public ushort TickRateHz;
        /// <summary>Welcome, Pong: server tick.</summary>
        public uint Tick;
        /// <summary>Welcome: maximum health.</summary>
        public ushort MaxHealth;
        /// <summary>Welcome: movement speed and body radius.</summary>
        public float MaxSpeed, PlayerRadius;
        /// <summary>Welcome: snapshot history length.</summary>
        public byte SnapshotHistory;
        /// <summary>Kill: killer; Hit: attacker; Chat: sender; Teleported: the pad.</summary>
        public ushort From;
        /// <summary>Kill, Hit: the victim.</summary>
        public ushort Victim;
        /// <summary>Hit: damage dealt and health left.</summary>
        public ushort Damage, Health;
        /// <summary>Respawn, Teleported: where.</summary>
        public float X, Y;
        /// <summary>Pong: the ping's nonce.</summary>
        public uint Nonce;
        /// <summary>Scores: the lines.</summary>
        public ScoreLine[] Scores;

        /// <summary>Decodes one message; a DecodeException for bytes that are not one.</summary>
        public static ServerMessage Decode(byte[] bytes, int offset, int length)
        {
            var r = new BitReader();
            r.Reset(bytes, offset, length);
            var m = new ServerMessage();
            ulong index = r.ReadBits(4);
            if (index > 10) throw new DecodeException(DecodeErrorKind.OutOfRange, "server message variant " + index);
            m.Type = (ServerMessageType)index;
            switch (m.Type)
            {
                case ServerMessageType.Welcome:
                    m.Protocol = (byte)r.ReadBits(8);
                    m.Id = (ushort)r.ReadBits(16);
                    m.Text = r.ReadString(64);
                    m.MapWidth = r.ReadF32();
                    m.MapHeight = r.ReadF32();
                    m.TickRateHz = (ushort)r.ReadBits(16);
                    m.Tick = (uint)r.ReadBits(32);
                    m.MaxHealth = (ushort)r.ReadBits(16);
                    m.MaxSpeed = r.ReadF32();
                    m.PlayerRadius = r.ReadF32();
                    m.SnapshotHistory = (byte)r.ReadBits(8);
                    break;
                case ServerMessageType.Kill:
                    m.From = (ushort)r.ReadBits(16);
                    m.Victim = (ushort)r.ReadBits(16);
                    break;
                case ServerMessageType.Hit:
                    m.From = (ushort)r.ReadBits(16);
                    m.Victim = (ushort)r.ReadBits(16);
                    m.Damage = (ushort)r.ReadBits(16);
                    m.Health = (ushort)r.ReadBits(16);
                    break;
                case ServerMessageType.Respawn:
                    m.X = r.ReadF32();
                    m.Y = r.ReadF32();
                    break;
                case ServerMessageType.Teleported:
                    m.From = (ushort)r.ReadBits(16);
                    m.X = r.ReadF32();
                    m.Y = r.ReadF32();
                    break;
                case ServerMessageType.Chat:
                    m.From = (ushort)r.ReadBits(16);
                    m.Text = r.ReadString(160);
                    break;
                case ServerMessageType.Announcement:
                    m.Text = r.ReadString(512);
                    break;
                case ServerMessageType.Pong:
                    m.Nonce = (uint)r.ReadBits(32);
                    m.Tick = (uint)r.ReadBits(32);
                    break;
                case ServerMessageType.Player:
                    m.Id = (ushort)r.ReadBits(16);
                    m.Text = r.ReadString(32);
                    break;
                case ServerMessageType.Left:
                    m.Id = (ushort)r.ReadBits(16);
                    break;
                default:
                    int count = r.ReadLength(32);
                    m.Scores = new ScoreLine[count];
                    for (int i = 0; i < count; i++)
                    {
                        m.Scores[i].Id = (ushort)r.ReadBits(16);
                        m.Scores[i].Kills = (uint)r.ReadVarint(uint.MaxValue);
                        m.Scores[i].Deaths = (uint)r.ReadVarint(uint.MaxValue);
                        m.Scores[i].Score = (uint)r.ReadVarint(uint.MaxValue);
                    }
                    break;
            }
            r.Finish();
            return m;
        }
    }
}
