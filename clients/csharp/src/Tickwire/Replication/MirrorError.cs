// Why a mirror did not apply a snapshot (the variants of the Rust MirrorError). A struct, so
// refusing a stale or baseline-less snapshot, which happens in normal play, allocates nothing.
using Tickwire.Wire;

namespace Tickwire.Replication
{
    /// <summary>Which rule a refused snapshot broke.</summary>
    public enum MirrorErrorKind
    {
        /// <summary>No error: the snapshot was applied.</summary>
        None,
        /// <summary>The bytes are not a snapshot of this world's types (<see cref="MirrorError.Decode"/> says how).</summary>
        Malformed,
        /// <summary>Not newer than the newest applied: a late or repeated datagram. Drop it.</summary>
        Stale,
        /// <summary>A delta against a view the mirror does not hold. Drop it; do not acknowledge it.</summary>
        MissingBaseline,
        /// <summary>Well-formed bits that break the format's rules (<see cref="MirrorError.Reason"/> names the rule).</summary>
        Invalid,
    }

    /// <summary>Why <see cref="Mirror.TryApply(byte[], int, int, out uint, out MirrorError)"/> refused a snapshot. The mirror is as it was.</summary>
    public readonly struct MirrorError
    {
        /// <summary>Which rule it broke.</summary>
        public readonly MirrorErrorKind Kind;

        /// <summary>The snapshot's tick (0 when it is too short to hold one).</summary>
        public readonly uint Tick;

        /// <summary>For <see cref="MirrorErrorKind.Stale"/>: the newest tick applied.</summary>
        public readonly uint Newest;

        /// <summary>For <see cref="MirrorErrorKind.MissingBaseline"/>: the baseline's tick.</summary>
        public readonly uint Baseline;

        /// <summary>For <see cref="MirrorErrorKind.Malformed"/>: the decode rule broken.</summary>
        public readonly DecodeErrorKind Decode;

        /// <summary>For Malformed the decoder's message, for Invalid the rule broken; otherwise null.</summary>
        public readonly string Reason;

        MirrorError(MirrorErrorKind kind, uint tick, uint newest, uint baseline, DecodeErrorKind decode, string reason)
        {
            Kind = kind;
            Tick = tick;
            Newest = newest;
            Baseline = baseline;
            Decode = decode;
            Reason = reason;
        }

        internal static MirrorError Malformed(uint tick, DecodeException e)
        {
            return new MirrorError(MirrorErrorKind.Malformed, tick, 0, 0, e.Kind, e.Message);
        }

        internal static MirrorError Stale(uint tick, uint newest)
        {
            return new MirrorError(MirrorErrorKind.Stale, tick, newest, 0, default(DecodeErrorKind), null);
        }

        internal static MirrorError MissingBaseline(uint tick, uint baseline)
        {
            return new MirrorError(MirrorErrorKind.MissingBaseline, tick, 0, baseline, default(DecodeErrorKind), null);
        }

        internal static MirrorError Invalid(uint tick, string rule)
        {
            return new MirrorError(MirrorErrorKind.Invalid, tick, 0, 0, default(DecodeErrorKind), rule);
        }

        /// <summary>The Rust error's message.</summary>
        public override string ToString()
        {
            switch (Kind)
            {
                case MirrorErrorKind.None: return "applied";
                case MirrorErrorKind.Malformed: return "malformed snapshot: " + Reason;
                case MirrorErrorKind.Stale: return "snapshot of tick " + Tick + " is not newer than tick " + Newest;
                case MirrorErrorKind.MissingBaseline:
                    return "snapshot of tick " + Tick + " is a delta against tick " + Baseline + ", which is not held";
                default: return "invalid snapshot: " + Reason;
            }
        }
    }
}
