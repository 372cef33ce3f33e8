"""Checks easybuild/trlhpc-*.eb with EasyBuild's own parser (run by test_easybuild.sh, with eb's Python).

CI builds only the SYSTEM variant; the centre variants (foss, foss + CUDA) cannot be built here (no foss
modules), so this checks what can drift between them: each parses under EasyBuild 5, is named as
EasyBuild names it (name-version[-toolchain-version]versionsuffix.eb), has CMakeLists.txt's version,
and builds, installs, sanity-checks and describes trlhpc the same way as the tested one; only the
toolchain, the dependencies and the TRLHPC_CUDA / TRLHPC_NATIVE options differ, as each file says.
Usage: python easyconfig_variants.py VERSION EASYCONFIG...   (exit 1 with the differences)
"""
import os
import sys

from easybuild.tools.options import set_up_configuration

set_up_configuration(args=['--allow-use-as-root-and-accept-consequences'], silent=True)
from easybuild.framework.easyconfig.easyconfig import EasyConfig  # noqa: E402 (needs the configuration)

# What every variant shares with the tested SYSTEM one.
SHARED = ['easyblock', 'description', 'sources', 'checksums', 'separate_build_dir', 'build_cmd_targets',
          'sanity_check_paths', 'sanity_check_commands', 'usage', 'moduleclass']
CENTRE_DEPENDENCIES = {'HDF5', 'OpenBLAS', 'Boost', 'yaml-cpp', 'PCRE2', 'snappy', 'zstd', 'zlib'}
CUDA_DEPENDENCIES = {'CUDA', 'NCCL', 'cuDNN'}


def facts(path):
    ec = EasyConfig(path)
    with ec.disable_templating():
        raw = {key: ec[key] for key in SHARED + ['name', 'version', 'versionsuffix', 'configopts', 'toolchain',
                                                 'osdependencies', 'modextravars', 'whatis']}
    raw['dependencies'] = {dep['name'] for dep in ec.dependencies()}
    raw['resolved_versionsuffix'] = ec['versionsuffix']  # -CUDA-%(cudaver)s -> -CUDA-12.8.0
    return raw


def main(version, paths):
    problems = []
    variants = {os.path.basename(path): facts(path) for path in paths}
    tested = variants.get(f'trlhpc-{version}.eb')
    if tested is None:
        sys.exit(f'no easybuild/trlhpc-{version}.eb (the SYSTEM variant CI builds) among {sorted(variants)}')
    for filename, ec in variants.items():
        def check(ok, what):
            if not ok:
                problems.append(f'{filename}: {what}')
        toolchain = ec['toolchain']
        system = toolchain['name'] == 'system'
        cuda = ec['versionsuffix'].startswith('-CUDA-')
        toolchain_part = '' if system else f"-{toolchain['name']}-{toolchain['version']}"
        expected = f"trlhpc-{version}{toolchain_part}{ec['resolved_versionsuffix']}.eb"
        check(filename == expected, f'EasyBuild would name it {expected}')
        check(ec['name'] == 'trlhpc' and ec['version'] == version, f"is {ec['name']} {ec['version']}, not trlhpc {version}")
        for key in SHARED:
            check(ec[key] == tested[key], f'{key} differs from the tested variant\'s: {ec[key]!r} vs {tested[key]!r}')
        check(ec['modextravars'].get('TRLHPC_ROOT') == '%(installdir)s', 'modextravars does not set TRLHPC_ROOT to %(installdir)s')
        check(ec['whatis'][:3] == tested['whatis'][:3], 'its first three whatis lines differ from the tested variant\'s')
        options = ec['configopts'].split()
        want = {f"-DTRLHPC_CUDA={'ON' if cuda else 'OFF'}", f"-DTRLHPC_NATIVE={'ON' if system else 'OFF'}"}
        check(want <= set(options), f'configopts lack {sorted(want - set(options))}')
        common = lambda opts: sorted(o for o in opts if not o.startswith(('-DTRLHPC_CUDA=', '-DTRLHPC_NATIVE=')))
        check(common(options) == common(tested['configopts'].split()), 'configopts differ from the tested variant\'s beyond TRLHPC_CUDA/TRLHPC_NATIVE')
        if system:
            check(ec['osdependencies'] and not ec['dependencies'], 'the SYSTEM variant takes every library from osdependencies')
        else:
            check(not ec['osdependencies'], 'a centre variant takes its libraries from modules, not osdependencies')
            check(CENTRE_DEPENDENCIES <= ec['dependencies'], f"lacks dependencies {sorted(CENTRE_DEPENDENCIES - ec['dependencies'])}")
            check((CUDA_DEPENDENCIES <= ec['dependencies']) == cuda and (cuda or not CUDA_DEPENDENCIES & ec['dependencies']),
                  'CUDA, NCCL and cuDNN are dependencies exactly when the versionsuffix is -CUDA-<version>')
    if problems:
        sys.exit('\n'.join(problems))
    print(f"easyconfig variants consistent: {', '.join(sorted(variants))}")


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2:])
