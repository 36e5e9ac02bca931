process GENIMPUTE_IMPUTE {
    tag "${meta.id}:${region}"
    label 'process_medium'
    container 'genimpute:0.2.0'

    input:
    tuple val(meta), path(target), path(target_index), val(region), path(panel)
    path model
    path genetic_map

    output:
    tuple val(meta), path("${prefix}.vcf.gz"), path("${prefix}.vcf.gz.tbi"), emit: vcf
    path "versions.yml"                                                     , emit: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    def region_arg = region ? "--region ${region}" : ''
    def source_arg = model ? "--model ${model} --ref ${panel} --engine model" : "--ref ${panel}"
    def map_arg = genetic_map ? "--map ${genetic_map}" : ''
    prefix = task.ext.prefix ?: "${meta.id}" + (region ? "_" + region.replaceAll(/[:\-]/, '_') : '')
    """
    genimpute impute ${target} ${source_arg} --out ${prefix}.vcf.gz --threads ${task.cpus} ${region_arg} ${map_arg} ${args}

    cat <<-END_VERSIONS > versions.yml
    "${task.process}":
        genimpute: \$(genimpute --version | sed 's/^genimpute, version //')
    END_VERSIONS
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}" + (region ? "_" + region.replaceAll(/[:\-]/, '_') : '')
    """
    echo | gzip > ${prefix}.vcf.gz
    touch ${prefix}.vcf.gz.tbi
    echo '"${task.process}": {genimpute: 0.2.0}' > versions.yml
    """
}
