// Entity instances a mirror is not using, per kind. A mirror takes one for every entity of a
// view it builds and returns them when it recycles a view, so once its views have filled the
// pool stays level and no instance is made again.
using System;

namespace Tickwire.Replication
{
    sealed class EntityPool
    {
        readonly ReplicatedSchema _schema;
        readonly IReplicatedKind[][] _free;
        readonly int[] _freeCount;

        public EntityPool(ReplicatedSchema schema)
        {
            _schema = schema;
            _free = new IReplicatedKind[schema.KindCount][];
            _freeCount = new int[schema.KindCount];
            for (int kind = 0; kind < _free.Length; kind++) _free[kind] = new IReplicatedKind[16];
        }

        /// <summary>An instance of <paramref name="kind"/> holding whatever it last held.</summary>
        public IReplicatedKind Take(int kind)
        {
            int count = _freeCount[kind];
            if (count == 0) return _schema.Create(kind);
            var stack = _free[kind];
            var entity = stack[count - 1];
            stack[count - 1] = null;
            _freeCount[kind] = count - 1;
            return entity;
        }

        /// <summary>Gives <paramref name="entity"/> back for reuse.</summary>
        public void Return(IReplicatedKind entity)
        {
            int kind = entity.Kind;
            int count = _freeCount[kind];
            var stack = _free[kind];
            if (count == stack.Length)
            {
                Array.Resize(ref stack, stack.Length * 2);
                _free[kind] = stack;
            }
            stack[count] = entity;
            _freeCount[kind] = count + 1;
        }
    }
}
