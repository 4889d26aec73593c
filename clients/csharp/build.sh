#!/bin/sh
# Builds the SDK (bin/Tickwire.dll) and its tests (bin/Tickwire.Tests.exe) with Mono's mcs.
# C# 7.2 is the newest language mcs knows, a subset of the 7.3 Unity compiles. mcs cannot
# compile against the netstandard.dll facade alone, so the SDK references only the assemblies
# whose APIs .NET Standard 2.0 also has (mscorlib, System, System.Core, System.Net.Http) and
# keeps to those APIs by hand (see README.md, "Compatibility").
set -eu
cd "$(dirname "$0")"
mkdir -p bin
mcs -langversion:7.2 -target:library -warnaserror+ -debug -nowarn:1591 \
    -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll \
    -doc:bin/Tickwire.xml -out:bin/Tickwire.dll $(find src -name '*.cs' | sort)
mcs -langversion:7.2 -target:exe -warnaserror+ -debug \
    -r:bin/Tickwire.dll -r:System.Net.Http.dll \
    -out:bin/Tickwire.Tests.exe $(find tests -name '*.cs' -not -path 'tests/unity-stub/*' | sort)
# The README's MonoBehaviour against a stub of UnityEngine: it must keep compiling.
mcs -langversion:7.2 -target:library -warnaserror+ -nowarn:0649,0169 \
    -r:bin/Tickwire.dll -out:bin/ArenaCube.dll tests/unity-stub/UnityEngine.cs examples/ArenaCube.cs
