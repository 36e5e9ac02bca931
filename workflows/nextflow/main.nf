#!/usr/bin/env nextflow
/*
 * genimpute scattered over chunks: each panel converted once -> (train) ->
 * chunks -> impute per chunk -> bcftools concat + index. With {chrom} in
 * --panel (quoted: 'panels/chr{chrom}.vcf.gz') every matching file is a
 * chromosome of its own, imputed from one genome-wide --targets file: the
 * jobs are chromosome x chunk, one output per chromosome, as the Snakemake
 * workflow does. Every step reads the compact panel: read from the VCF, a
 * large panel is parsed again by each job. Not run by the test suite (no
 * Nextflow runtime on this project's machines): checked statically.
 *
 *   nextflow run workflows/nextflow/main.nf --panel panel.vcf.gz --targets targets.vcf.gz \
 *       --model pretrained           # or a model directory, or --array sites.txt to train one first
 *       [--map genetic.map] [--chunk_size 5Mb] [--outdir results] -profile docker
 *
 * On a cluster, pick an executor in nextflow.config (e.g. process.executor = 'slurm').
 */
nextflow.enable.dsl = 2

include { GENIMPUTE_PANEL  } from './modules/local/genimpute/panel/main'
include { GENIMPUTE_TRAIN  } from './modules/local/genimpute/train/main'
include { GENIMPUTE_CHUNKS } from './modules/local/genimpute/chunks/main'
include { GENIMPUTE_IMPUTE } from './modules/local/genimpute/impute/main'

params.panel      = null
params.targets    = null
params.array      = null
params.model      = null   // a model directory, or 'pretrained': the copying engine, no training
params.map        = null   // PLINK or shapeit4 genetic map; none: 1 cM per Mb
params.chunk_size = '5Mb'
params.outdir     = 'genimpute_results'

process CONCAT {
    tag "$meta.id"
    label 'process_single'
    container 'genimpute:0.2.0'
    publishDir params.outdir, mode: 'copy'

    input:
    tuple val(meta), path(vcfs), path(indexes)

    output:
    tuple val(meta), path("${meta.id}.imputed.vcf.gz"), path("${meta.id}.imputed.vcf.gz.tbi")

    script:
    // chunk files arrive sorted by their index in the chunk list
    """
    bcftools concat -Oz -o ${meta.id}.imputed.vcf.gz ${vcfs.join(' ')}
    tabix -p vcf ${meta.id}.imputed.vcf.gz
    """
}

workflow {
    if (!params.panel || !params.targets) {
        error "expected --panel and --targets"
    }
    if (!params.model && !params.array) {
        error "expected --model (a trained model directory, or 'pretrained') or --array (to train one)"
    }
    def per_chromosome = params.panel.contains('{chrom}')
    if (per_chromosome && !params.model) {
        error "expected --model with a panel per chromosome (training takes one panel)"
    }
    def pattern = per_chromosome ? params.panel.replace('{chrom}', '*') : params.panel
    def name_of = per_chromosome
        ? { f -> (f.name =~ java.util.regex.Pattern.quote(file(params.panel).name).replace('{chrom}', '\\E(.+)\\Q'))[0][1] }
        : { f -> 'panel' }
    def panel_vcfs = Channel.fromPath(pattern, checkIfExists: true)
        .map { f -> [[id: name_of(f)], f, file(f.toString() + '.tbi')] }
    def genetic_map = params.map ? file(params.map) : []
    def panels = GENIMPUTE_PANEL(panel_vcfs, genetic_map).panel
    def model = params.model == 'pretrained'
        ? Channel.value([])
        : params.model
        ? Channel.value(file(params.model, type: 'dir'))
        : GENIMPUTE_TRAIN(panels, file(params.array), genetic_map).model.map { meta, dir -> dir }

    def regions = GENIMPUTE_CHUNKS(panels, params.chunk_size).chunks
        .flatMap { meta, list -> list.readLines().findAll { it.trim() }.withIndex().collect { region, i -> [meta.id, region, i] } }

    def target = file(params.targets)
    def jobs = regions
        .combine(panels.map { meta, compact -> [meta.id, compact] }, by: 0)
        .map { chrom, region, i, compact ->
            [[id: per_chromosome ? "${target.simpleName}.${chrom}" : target.simpleName, chunk: i], target,
             file(params.targets + '.tbi'), region, compact] }
    def imputed = GENIMPUTE_IMPUTE(jobs, model, genetic_map).vcf

    def gathered = imputed
        .map { meta, vcf, tbi -> [meta.id, meta.chunk, vcf, tbi] }
        .groupTuple()
        .map { id, chunks, vcfs, tbis ->
            def order = (0..<chunks.size()).sort { chunks[it] }
            [[id: id], order.collect { vcfs[it] }, order.collect { tbis[it] }]
        }
    CONCAT(gathered)
}
