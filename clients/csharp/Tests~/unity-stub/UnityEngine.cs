// Just enough of UnityEngine's surface for build.sh to compile examples/ArenaCube.cs (the
// README's MonoBehaviour), so the example cannot drift from the SDK's API. Not shipped.
namespace UnityEngine
{
    public class Object { }
    public class Component : Object { public Transform transform = new Transform(); }
    public class Behaviour : Component { }
    public class MonoBehaviour : Behaviour { }
    public sealed class Transform { public Vector3 position; }
    public struct Vector3 { public float x, y, z; public Vector3(float x, float y, float z) { this.x = x; this.y = y; this.z = z; } }
    public enum RuntimePlatform { LinuxPlayer, WebGLPlayer }
    public static class Application { public static RuntimePlatform platform { get { return RuntimePlatform.LinuxPlayer; } } }
    public static class Input
    {
        public static float GetAxis(string name) { return 0; }
        public static bool GetButton(string name) { return false; }
    }
}
