using System;

namespace Tickwire.Tests
{
    static class Alloc
    {
        /// <summary>
        /// Bytes this thread allocated while running <paramref name="action"/>
        /// <paramref name="times"/> times, after one warm-up run (JIT, buffers growing).
        /// </summary>
        public static long Measure(Action action, int times)
        {
            action();
            long before = GC.GetAllocatedBytesForCurrentThread();
            for (int i = 0; i < times; i++) action();
            return GC.GetAllocatedBytesForCurrentThread() - before;
        }
    }
}
